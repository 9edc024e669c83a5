// navmesh.cpp -- the C++ shim between navmesh.h and Recast/Detour (Debian's
// librecast-dev): it owns the Detour mesh and one query object per mesh,
// runs Recast's build pipeline (the steps of RecastDemo's solo mesh), and
// turns every failure into an error string. No exception crosses the C API.
#include "navmesh.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include <recastnavigation/DetourNavMesh.h>
#include <recastnavigation/DetourNavMeshBuilder.h>
#include <recastnavigation/DetourNavMeshQuery.h>
#include <recastnavigation/Recast.h>

struct navmesh {
    dtNavMesh *mesh;
    dtNavMeshQuery *query;
    dtQueryFilter filter;
};

namespace {

// The most polygons a path may cross: far more than a walk across a
// kilometre of open ground with obstacles needs.
const int NAVMESH_MAX_PATH_POLYGONS = 2048;
// Nodes Detour's A* may open per query.
const int NAVMESH_QUERY_NODES = 4096;
const unsigned short NAVMESH_WALKABLE = 1;

void navmesh_error(char *err, size_t errlen, const char *text) {
    if (err && errlen) std::snprintf(err, errlen, "%s", text);
}

// Everything Recast allocates on the way, freed on every exit.
struct navmesh_build_state {
    rcHeightfield *solid = nullptr;
    rcCompactHeightfield *compact = nullptr;
    rcContourSet *contours = nullptr;
    rcPolyMesh *polygons = nullptr;
    rcPolyMeshDetail *detail = nullptr;
    unsigned char *areas = nullptr;
    ~navmesh_build_state() {
        rcFreeHeightField(solid);
        rcFreeCompactHeightfield(compact);
        rcFreeContourSet(contours);
        rcFreePolyMesh(polygons);
        rcFreePolyMeshDetail(detail);
        delete[] areas;
    }
};

navmesh *navmesh_from_data(unsigned char *data, int size, char *err, size_t errlen) {
    dtNavMesh *mesh = dtAllocNavMesh();
    if (!mesh) {
        dtFree(data);
        navmesh_error(err, errlen, "out of memory for the navigation mesh");
        return nullptr;
    }
    if (dtStatusFailed(mesh->init(data, size, DT_TILE_FREE_DATA))) {
        dtFree(data);
        dtFreeNavMesh(mesh);
        navmesh_error(err, errlen, "the data is not a navigation mesh of this Detour version");
        return nullptr;
    }
    dtNavMeshQuery *query = dtAllocNavMeshQuery();
    if (!query || dtStatusFailed(query->init(mesh, NAVMESH_QUERY_NODES))) {
        dtFreeNavMeshQuery(query);
        dtFreeNavMesh(mesh);
        navmesh_error(err, errlen, "out of memory for the navigation query");
        return nullptr;
    }
    navmesh *out = new (std::nothrow) navmesh;
    if (!out) {
        dtFreeNavMeshQuery(query);
        dtFreeNavMesh(mesh);
        navmesh_error(err, errlen, "out of memory");
        return nullptr;
    }
    out->mesh = mesh;
    out->query = query;
    out->filter.setIncludeFlags(NAVMESH_WALKABLE);
    out->filter.setExcludeFlags(0);
    return out;
}

} // namespace

extern "C" {

navmesh_config navmesh_default_config(void) {
    navmesh_config config;
    config.cell_size = 0.5f;
    config.cell_height = 0.2f;
    config.agent_radius = 0.5f;
    config.agent_height = 2.0f;
    config.agent_climb = 0.9f;
    config.max_slope = 45.0f;
    return config;
}

navmesh *navmesh_build(const float *vertices, size_t vertex_count, const int32_t *triangles, size_t triangle_count,
                       const navmesh_config *settings, char *err, size_t errlen) {
    navmesh_config config = settings ? *settings : navmesh_default_config();
    if (!vertices || !triangles || vertex_count == 0 || triangle_count == 0) {
        navmesh_error(err, errlen, "the geometry has no triangles");
        return nullptr;
    }
    if (vertex_count > 10000000 || triangle_count > 10000000) {
        navmesh_error(err, errlen, "the geometry has more than ten million vertices or triangles");
        return nullptr;
    }
    for (size_t i = 0; i < triangle_count * 3; i++)
        if (triangles[i] < 0 || (size_t)triangles[i] >= vertex_count) {
            char text[128];
            std::snprintf(text, sizeof text, "triangle %zu names vertex %d, and there are %zu", i / 3,
                          (int)triangles[i], vertex_count);
            navmesh_error(err, errlen, text);
            return nullptr;
        }
    for (size_t i = 0; i < vertex_count * 3; i++)
        if (!std::isfinite(vertices[i])) {
            navmesh_error(err, errlen, "a vertex is not a finite point");
            return nullptr;
        }
    if (!(config.cell_size > 0) || !(config.cell_height > 0) || !(config.agent_radius >= 0) ||
        !(config.agent_height > 0) || !(config.agent_climb >= 0) || !(config.max_slope > 0)) {
        navmesh_error(err, errlen, "the navigation settings must be positive");
        return nullptr;
    }
    const int nverts = (int)vertex_count, ntris = (int)triangle_count;
    rcConfig cfg;
    std::memset(&cfg, 0, sizeof cfg);
    cfg.cs = config.cell_size;
    cfg.ch = config.cell_height;
    cfg.walkableSlopeAngle = config.max_slope;
    cfg.walkableHeight = (int)std::ceil(config.agent_height / cfg.ch);
    cfg.walkableClimb = (int)std::floor(config.agent_climb / cfg.ch);
    cfg.walkableRadius = (int)std::ceil(config.agent_radius / cfg.cs);
    cfg.maxEdgeLen = (int)(12.0f / cfg.cs);
    cfg.maxSimplificationError = 1.3f;
    cfg.minRegionArea = 8 * 8;
    cfg.mergeRegionArea = 20 * 20;
    cfg.maxVertsPerPoly = 6;
    cfg.detailSampleDist = cfg.cs * 6.0f;
    cfg.detailSampleMaxError = cfg.ch;
    rcCalcBounds(vertices, nverts, cfg.bmin, cfg.bmax);
    rcCalcGridSize(cfg.bmin, cfg.bmax, cfg.cs, &cfg.width, &cfg.height);
    if (cfg.width <= 0 || cfg.height <= 0) {
        navmesh_error(err, errlen, "nothing in the geometry is walkable: it has no extent on the ground");
        return nullptr;
    }
    // One tile: Detour keeps its vertices as 16-bit voxel coordinates.
    if (cfg.width >= 65535 || cfg.height >= 65535 || (long)cfg.width * cfg.height > 64L * 1024 * 1024) {
        navmesh_error(err, errlen, "the geometry spans too many cells for one mesh (raise cell_size)");
        return nullptr;
    }

    rcContext context(false);
    navmesh_build_state state;
    state.solid = rcAllocHeightfield();
    state.areas = new (std::nothrow) unsigned char[ntris];
    if (!state.solid || !state.areas ||
        !rcCreateHeightfield(&context, *state.solid, cfg.width, cfg.height, cfg.bmin, cfg.bmax, cfg.cs, cfg.ch)) {
        navmesh_error(err, errlen, "out of memory for the heightfield");
        return nullptr;
    }
    std::memset(state.areas, 0, (size_t)ntris);
    rcMarkWalkableTriangles(&context, cfg.walkableSlopeAngle, vertices, nverts, triangles, ntris, state.areas);
    if (!rcRasterizeTriangles(&context, vertices, nverts, triangles, state.areas, ntris, *state.solid,
                              cfg.walkableClimb)) {
        navmesh_error(err, errlen, "the triangles could not be voxelized");
        return nullptr;
    }
    rcFilterLowHangingWalkableObstacles(&context, cfg.walkableClimb, *state.solid);
    rcFilterLedgeSpans(&context, cfg.walkableHeight, cfg.walkableClimb, *state.solid);
    rcFilterWalkableLowHeightSpans(&context, cfg.walkableHeight, *state.solid);
    state.compact = rcAllocCompactHeightfield();
    if (!state.compact ||
        !rcBuildCompactHeightfield(&context, cfg.walkableHeight, cfg.walkableClimb, *state.solid, *state.compact) ||
        !rcErodeWalkableArea(&context, cfg.walkableRadius, *state.compact) ||
        !rcBuildDistanceField(&context, *state.compact) ||
        !rcBuildRegions(&context, *state.compact, 0, cfg.minRegionArea, cfg.mergeRegionArea)) {
        navmesh_error(err, errlen, "the walkable area could not be divided into regions");
        return nullptr;
    }
    state.contours = rcAllocContourSet();
    state.polygons = rcAllocPolyMesh();
    state.detail = rcAllocPolyMeshDetail();
    if (!state.contours || !state.polygons || !state.detail ||
        !rcBuildContours(&context, *state.compact, cfg.maxSimplificationError, cfg.maxEdgeLen, *state.contours) ||
        !rcBuildPolyMesh(&context, *state.contours, cfg.maxVertsPerPoly, *state.polygons) ||
        !rcBuildPolyMeshDetail(&context, *state.polygons, *state.compact, cfg.detailSampleDist,
                               cfg.detailSampleMaxError, *state.detail)) {
        navmesh_error(err, errlen, "the walkable area could not be turned into polygons");
        return nullptr;
    }
    rcPolyMesh &polygons = *state.polygons;
    if (polygons.npolys == 0) {
        navmesh_error(err, errlen, "nothing in the geometry is walkable for the configured agent");
        return nullptr;
    }
    for (int i = 0; i < polygons.npolys; i++)
        polygons.flags[i] = polygons.areas[i] == RC_WALKABLE_AREA ? NAVMESH_WALKABLE : 0;

    dtNavMeshCreateParams params;
    std::memset(&params, 0, sizeof params);
    params.verts = polygons.verts;
    params.vertCount = polygons.nverts;
    params.polys = polygons.polys;
    params.polyAreas = polygons.areas;
    params.polyFlags = polygons.flags;
    params.polyCount = polygons.npolys;
    params.nvp = polygons.nvp;
    params.detailMeshes = state.detail->meshes;
    params.detailVerts = state.detail->verts;
    params.detailVertsCount = state.detail->nverts;
    params.detailTris = state.detail->tris;
    params.detailTriCount = state.detail->ntris;
    params.walkableHeight = config.agent_height;
    params.walkableRadius = config.agent_radius;
    params.walkableClimb = config.agent_climb;
    rcVcopy(params.bmin, polygons.bmin);
    rcVcopy(params.bmax, polygons.bmax);
    params.cs = cfg.cs;
    params.ch = cfg.ch;
    params.buildBvTree = true;
    unsigned char *data = nullptr;
    int size = 0;
    if (!dtCreateNavMeshData(&params, &data, &size)) {
        navmesh_error(err, errlen, "Detour could not make a mesh of the polygons (too many vertices?)");
        return nullptr;
    }
    return navmesh_from_data(data, size, err, errlen);
}

uint8_t *navmesh_save(const navmesh *mesh, size_t *length) {
    const dtNavMesh *nav = mesh->mesh;
    const dtMeshTile *tile = nav->getTile(0);
    if (!tile || !tile->data || tile->dataSize <= 0) return nullptr;
    uint8_t *out = static_cast<uint8_t *>(std::malloc((size_t)tile->dataSize));
    if (!out) return nullptr;
    std::memcpy(out, tile->data, (size_t)tile->dataSize);
    *length = (size_t)tile->dataSize;
    return out;
}

navmesh *navmesh_load(const uint8_t *data, size_t length, char *err, size_t errlen) {
    if (!data || length < sizeof(dtMeshHeader) || length > (size_t)1 << 30) {
        navmesh_error(err, errlen, "the data is too short or too long to be a navigation mesh");
        return nullptr;
    }
    unsigned char *copy = static_cast<unsigned char *>(dtAlloc((int)length, DT_ALLOC_PERM));
    if (!copy) {
        navmesh_error(err, errlen, "out of memory");
        return nullptr;
    }
    std::memcpy(copy, data, length);
    return navmesh_from_data(copy, (int)length, err, errlen);
}

void navmesh_free(navmesh *mesh) {
    if (!mesh) return;
    dtFreeNavMeshQuery(mesh->query);
    dtFreeNavMesh(mesh->mesh);
    delete mesh;
}

int navmesh_polygon_count(const navmesh *mesh) {
    const dtMeshTile *tile = static_cast<const dtNavMesh *>(mesh->mesh)->getTile(0);
    return tile && tile->header ? tile->header->polyCount : 0;
}

int navmesh_nearest_point(const navmesh *mesh, const float point[3], float reach, float out[3]) {
    const float extents[3] = {reach, 4.0f, reach};
    dtPolyRef ref = 0;
    if (dtStatusFailed(mesh->query->findNearestPoly(point, extents, &mesh->filter, &ref, out)) || !ref) return -1;
    return 0;
}

int navmesh_find_path(const navmesh *mesh, const float start[3], const float end[3], float *points, size_t max_points,
                      size_t *count, char *why, size_t why_size) {
    *count = 0;
    if (!points || max_points == 0 || max_points > 1000000) {
        navmesh_error(why, why_size, "no room for the path's points");
        return -1;
    }
    for (int i = 0; i < 3; i++)
        if (!std::isfinite(start[i]) || !std::isfinite(end[i])) {
            navmesh_error(why, why_size, "a point is not finite");
            return -1;
        }
    const float extents[3] = {2.0f, 4.0f, 2.0f};
    dtPolyRef start_ref = 0, end_ref = 0;
    float start_on[3], end_on[3];
    dtNavMeshQuery *query = mesh->query;
    if (dtStatusFailed(query->findNearestPoly(start, extents, &mesh->filter, &start_ref, start_on)) || !start_ref) {
        navmesh_error(why, why_size, "the start is not near any walkable surface");
        return -1;
    }
    if (dtStatusFailed(query->findNearestPoly(end, extents, &mesh->filter, &end_ref, end_on)) || !end_ref) {
        navmesh_error(why, why_size, "the destination is not near any walkable surface");
        return -1;
    }
    dtPolyRef corridor[NAVMESH_MAX_PATH_POLYGONS];
    int corridor_count = 0;
    dtStatus status = query->findPath(start_ref, end_ref, start_on, end_on, &mesh->filter, corridor, &corridor_count,
                                      NAVMESH_MAX_PATH_POLYGONS);
    if (dtStatusFailed(status) || corridor_count == 0 || corridor[corridor_count - 1] != end_ref) {
        navmesh_error(why, why_size, "no path joins the start to the destination");
        return -1;
    }
    if (status & DT_BUFFER_TOO_SMALL) {
        navmesh_error(why, why_size, "the path crosses more polygons than a query may");
        return -1;
    }
    int limit = max_points > (size_t)NAVMESH_MAX_PATH_POLYGONS ? NAVMESH_MAX_PATH_POLYGONS : (int)max_points;
    int straight_count = 0;
    status = query->findStraightPath(start_on, end_on, corridor, corridor_count, points, nullptr, nullptr,
                                     &straight_count, limit);
    if (dtStatusFailed(status) || straight_count == 0) {
        navmesh_error(why, why_size, "the path's corners could not be found");
        return -1;
    }
    if (status & DT_BUFFER_TOO_SMALL) {
        navmesh_error(why, why_size, "the path has more corners than there is room for");
        return -1;
    }
    *count = (size_t)straight_count;
    return 0;
}

} // extern "C"
