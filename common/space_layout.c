/* space_layout.c -- a space's BSP tree of cells: building it (one cell, a
 * grid), reading and writing its JSON form, checking it, answering which
 * cell holds a point and which cells come near one, and the operator's and
 * balancer's edits. The tree lives in one array of nodes; children are
 * indices. What the layout means for entities is the cellapp's business
 * (cellapp/spaces.c). */
#include "space_layout.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "json_file.h"
#include "log.h"

static int32_t space_layout_add_node(space_layout *layout) {
    if (layout->node_count == layout->node_capacity) {
        layout->node_capacity = layout->node_capacity ? layout->node_capacity * 2 : 8;
        layout->nodes = xrealloc(layout->nodes, (size_t)layout->node_capacity * sizeof *layout->nodes);
    }
    int32_t index = layout->node_count++;
    memset(&layout->nodes[index], 0, sizeof layout->nodes[index]);
    layout->nodes[index].low = layout->nodes[index].high = SPACE_LAYOUT_NONE;
    layout->nodes[index].aggression = 1.0;
    return index;
}

static int32_t space_layout_add_leaf(space_layout *layout, uint32_t cell_id, uint64_t cellapp_id) {
    int32_t index = space_layout_add_node(layout);
    layout->nodes[index].leaf = true;
    layout->nodes[index].cell_id = cell_id;
    layout->nodes[index].cellapp_id = cellapp_id;
    return index;
}

static bool space_layout_valid_bounds(const double min[3], const double max[3]) {
    for (int a = 0; a < 3; a++)
        if (!isfinite(min[a]) || !isfinite(max[a]) || min[a] >= max[a]) return false;
    return true;
}

static space_layout *space_layout_empty(const char *name, const double min[3], const double max[3], bool three_d) {
    if (!name || !name[0] || strlen(name) >= SPACE_LAYOUT_NAME_MAX || !space_layout_valid_bounds(min, max)) return NULL;
    space_layout *layout = xcalloc(1, sizeof *layout);
    snprintf(layout->name, sizeof layout->name, "%s", name);
    layout->three_d = three_d;
    memcpy(layout->min, min, sizeof layout->min);
    memcpy(layout->max, max, sizeof layout->max);
    layout->spawn_x = (min[0] + max[0]) / 2;
    layout->spawn_z = (min[2] + max[2]) / 2;
    layout->spawn_radius = fmin(50.0, fmin(max[0] - min[0], max[2] - min[2]) / 2);
    layout->next_cell_id = 1;
    layout->root = SPACE_LAYOUT_NONE;
    return layout;
}

space_layout *space_layout_create(const char *name, const double min[3], const double max[3], bool three_d,
                                  uint64_t cellapp_id) {
    space_layout *layout = space_layout_empty(name, min, max, three_d);
    if (!layout) return NULL;
    layout->root = space_layout_add_leaf(layout, layout->next_cell_id++, cellapp_id);
    return layout;
}

/* Builds `count` cells side by side along `axis` over [low, high), then
 * (for X) each of them into `rows` along Z. Cells are numbered in the order
 * they are made. */
static int32_t space_layout_build_run(space_layout *layout, space_layout_axis axis, double low, double high,
                                      uint32_t count, uint32_t rows, const uint64_t *cellapps, size_t cellapp_count) {
    if (count == 1) {
        if (axis == SPACE_LAYOUT_AXIS_X)
            return space_layout_build_run(layout, SPACE_LAYOUT_AXIS_Z, layout->min[2], layout->max[2], rows, 0,
                                          cellapps, cellapp_count);
        uint32_t cell = layout->next_cell_id++;
        return space_layout_add_leaf(layout, cell, cellapps[(cell - 1) % cellapp_count]);
    }
    uint32_t low_count = count / 2;
    double at = low + (high - low) * (double)low_count / (double)count;
    int32_t split = space_layout_add_node(layout);
    int32_t low_child = space_layout_build_run(layout, axis, low, at, low_count, rows, cellapps, cellapp_count);
    int32_t high_child =
        space_layout_build_run(layout, axis, at, high, count - low_count, rows, cellapps, cellapp_count);
    layout->nodes[split].axis = axis;
    layout->nodes[split].at = at;
    layout->nodes[split].low = low_child;
    layout->nodes[split].high = high_child;
    return split;
}

space_layout *space_layout_create_grid(const char *name, const double min[3], const double max[3], bool three_d,
                                       uint32_t columns, uint32_t rows, const uint64_t *cellapps, size_t count) {
    if (columns == 0 || rows == 0 || count == 0 || (uint64_t)columns * rows > 4096) return NULL;
    space_layout *layout = space_layout_empty(name, min, max, three_d);
    if (!layout) return NULL;
    layout->root = space_layout_build_run(layout, SPACE_LAYOUT_AXIS_X, min[0], max[0], columns, rows, cellapps, count);
    return layout;
}

space_layout *space_layout_copy(const space_layout *layout) {
    space_layout *copy = xmalloc(sizeof *copy);
    *copy = *layout;
    copy->nodes = xmalloc((size_t)(layout->node_capacity ? layout->node_capacity : 1) * sizeof *copy->nodes);
    memcpy(copy->nodes, layout->nodes, (size_t)layout->node_count * sizeof *copy->nodes);
    return copy;
}

void space_layout_free(space_layout *layout) {
    if (!layout) return;
    free(layout->nodes);
    free(layout);
}

const char *space_layout_axis_name(space_layout_axis axis) { return axis == SPACE_LAYOUT_AXIS_X ? "x" : "z"; }

/* ---- JSON ------------------------------------------------------------------ */

typedef struct space_layout_reader {
    space_layout *layout;
    char *err;
    size_t errlen;
} space_layout_reader;

static bool space_layout_read_number(const cJSON *object, const char *name, double *out) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, name);
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble)) return false;
    *out = item->valuedouble;
    return true;
}

static bool space_layout_read_id(const cJSON *object, const char *name, uint64_t max, uint64_t *out) {
    double value;
    if (!space_layout_read_number(object, name, &value) || value < 0 || value > (double)max || value != floor(value))
        return false;
    *out = (uint64_t)value;
    return true;
}

/* Reads one node (and its subtree) at `path` ("tree", "tree.low", ...). */
static int32_t space_layout_read_node(space_layout_reader *reader, const cJSON *item, const char *path, int depth) {
    space_layout *layout = reader->layout;
    if (!cJSON_IsObject(item)) {
        snprintf(reader->err, reader->errlen, "%s: not an object", path);
        return SPACE_LAYOUT_NONE;
    }
    if (depth > SPACE_LAYOUT_MAX_DEPTH) {
        snprintf(reader->err, reader->errlen, "%s: the tree is deeper than %d", path, SPACE_LAYOUT_MAX_DEPTH);
        return SPACE_LAYOUT_NONE;
    }
    const cJSON *split = cJSON_GetObjectItemCaseSensitive(item, "split");
    if (!split) {
        uint64_t cell, cellapp;
        if (!space_layout_read_id(item, "cell", UINT32_MAX, &cell) || cell == 0) {
            snprintf(reader->err, reader->errlen, "%s: a cell needs \"cell\", an id from 1", path);
            return SPACE_LAYOUT_NONE;
        }
        if (!space_layout_read_id(item, "cellapp", (uint64_t)1 << 53, &cellapp)) {
            snprintf(reader->err, reader->errlen, "%s: cell %" PRIu64 " needs \"cellapp\", a process id", path, cell);
            return SPACE_LAYOUT_NONE;
        }
        int32_t leaf = space_layout_add_leaf(layout, (uint32_t)cell, cellapp);
        layout->nodes[leaf].retiring = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(item, "retiring"));
        return leaf;
    }
    space_layout_axis axis;
    if (cJSON_IsString(split) && strcmp(split->valuestring, "x") == 0)
        axis = SPACE_LAYOUT_AXIS_X;
    else if (cJSON_IsString(split) && strcmp(split->valuestring, "z") == 0)
        axis = SPACE_LAYOUT_AXIS_Z;
    else {
        snprintf(reader->err, reader->errlen, "%s: \"split\" must be \"x\" or \"z\"", path);
        return SPACE_LAYOUT_NONE;
    }
    double at;
    if (!space_layout_read_number(item, "at", &at)) {
        snprintf(reader->err, reader->errlen, "%s: a split needs \"at\", a finite number", path);
        return SPACE_LAYOUT_NONE;
    }
    double aggression = 1.0, direction = 0;
    if (cJSON_GetObjectItemCaseSensitive(item, "aggression") &&
        !(space_layout_read_number(item, "aggression", &aggression) && aggression > 0 && aggression <= 1)) {
        snprintf(reader->err, reader->errlen, "%s: \"aggression\" must be a number in (0, 1]", path);
        return SPACE_LAYOUT_NONE;
    }
    if (cJSON_GetObjectItemCaseSensitive(item, "direction") &&
        !(space_layout_read_number(item, "direction", &direction) &&
          (direction == -1 || direction == 0 || direction == 1))) {
        snprintf(reader->err, reader->errlen, "%s: \"direction\" must be -1, 0 or 1", path);
        return SPACE_LAYOUT_NONE;
    }
    int32_t index = space_layout_add_node(layout);
    layout->nodes[index].aggression = aggression;
    layout->nodes[index].direction = (int8_t)direction;
    char child_path[256];
    snprintf(child_path, sizeof child_path, "%s.low", path);
    int32_t low = space_layout_read_node(reader, cJSON_GetObjectItemCaseSensitive(item, "low"), child_path, depth + 1);
    if (low == SPACE_LAYOUT_NONE) return SPACE_LAYOUT_NONE;
    snprintf(child_path, sizeof child_path, "%s.high", path);
    int32_t high =
        space_layout_read_node(reader, cJSON_GetObjectItemCaseSensitive(item, "high"), child_path, depth + 1);
    if (high == SPACE_LAYOUT_NONE) return SPACE_LAYOUT_NONE;
    space_layout_node *node = &layout->nodes[index];
    node->axis = axis;
    node->at = at;
    node->low = low;
    node->high = high;
    return index;
}

static bool space_layout_read_triple(const cJSON *root, const char *name, double out[3]) {
    const cJSON *array = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!cJSON_IsArray(array) || cJSON_GetArraySize(array) != 3) return false;
    for (int a = 0; a < 3; a++) {
        const cJSON *item = cJSON_GetArrayItem(array, a);
        if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble)) return false;
        out[a] = item->valuedouble;
    }
    return true;
}

space_layout *space_layout_from_json(const char *text, size_t length, char *err, size_t errlen) {
    char problem[256];
    cJSON *root = json_file_parse(text, length, problem, sizeof problem);
    if (!root) {
        snprintf(err, errlen, "%s", problem);
        return NULL;
    }
    space_layout *layout = NULL;
    double min[3], max[3];
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    if (!cJSON_IsObject(root)) {
        snprintf(err, errlen, "a space is a JSON object");
    } else if (!cJSON_IsString(name) || !name->valuestring[0] || strlen(name->valuestring) >= SPACE_LAYOUT_NAME_MAX) {
        snprintf(err, errlen, "\"name\" must be a string of 1 to %d bytes", SPACE_LAYOUT_NAME_MAX - 1);
    } else if (!space_layout_read_triple(root, "min", min) || !space_layout_read_triple(root, "max", max)) {
        snprintf(err, errlen, "space '%s': \"min\" and \"max\" must be [x, y, z] of finite numbers", name->valuestring);
    } else if (!(layout = space_layout_empty(name->valuestring, min, max, false))) {
        snprintf(err, errlen, "space '%s': every bound in \"min\" must be below its \"max\"", name->valuestring);
    } else {
        uint64_t value;
        const cJSON *three_d = cJSON_GetObjectItemCaseSensitive(root, "three_d");
        const cJSON *spawn = cJSON_GetObjectItemCaseSensitive(root, "spawn");
        layout->three_d = cJSON_IsTrue(three_d);
        const cJSON *epoch = cJSON_GetObjectItemCaseSensitive(root, "epoch");
        if (epoch && !space_layout_read_id(root, "epoch", UINT64_MAX >> 11, &value)) {
            snprintf(err, errlen, "space '%s': \"epoch\" must be a whole number from 0", layout->name);
            goto fail;
        }
        if (epoch) layout->epoch = value;
        if (cJSON_GetObjectItemCaseSensitive(root, "fence")) {
            if (!space_layout_read_id(root, "fence", UINT64_MAX >> 11, &value)) {
                snprintf(err, errlen, "space '%s': \"fence\" must be a whole number from 0", layout->name);
                goto fail;
            }
            layout->fence = value;
        }
        if (spawn && !(space_layout_read_number(spawn, "x", &layout->spawn_x) &&
                       space_layout_read_number(spawn, "z", &layout->spawn_z) &&
                       space_layout_read_number(spawn, "radius", &layout->spawn_radius))) {
            snprintf(err, errlen, "space '%s': \"spawn\" needs x, z and radius, finite numbers", layout->name);
            goto fail;
        }
        space_layout_reader reader = {layout, err, errlen};
        layout->root = space_layout_read_node(&reader, cJSON_GetObjectItemCaseSensitive(root, "tree"), "tree", 0);
        if (layout->root == SPACE_LAYOUT_NONE) goto fail;
        uint32_t highest = 0;
        for (int32_t i = 0; i < layout->node_count; i++)
            if (layout->nodes[i].leaf && layout->nodes[i].cell_id > highest) highest = layout->nodes[i].cell_id;
        layout->next_cell_id = highest + 1;
        if (space_layout_read_id(root, "next_cell", UINT32_MAX, &value) && value > highest)
            layout->next_cell_id = (uint32_t)value;
        cJSON_Delete(root);
        return layout;
    }
fail:
    space_layout_free(layout);
    cJSON_Delete(root);
    return NULL;
}

/* A number as raw JSON text that reads back as the same double (cJSON's own
 * printer settles for 15 digits that come within an epsilon of the value,
 * which moves split lines, and ids and epochs near 2^53, by an ulp). */
static cJSON *space_layout_number(double value) {
    if (!isfinite(value)) return cJSON_CreateNull();
    char text[32];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(text, sizeof text, "%.*g", digits, value);
        if (strtod(text, NULL) == value) break;
    }
    return cJSON_CreateRaw(text);
}

static void space_layout_add_number(cJSON *object, const char *name, double value) {
    cJSON_AddItemToObject(object, name, space_layout_number(value));
}

static cJSON *space_layout_triple_json(const double values[3]) {
    cJSON *array = cJSON_CreateArray();
    for (int a = 0; a < 3; a++) cJSON_AddItemToArray(array, space_layout_number(values[a]));
    return array;
}

static cJSON *space_layout_node_json(const space_layout *layout, int32_t index) {
    const space_layout_node *node = &layout->nodes[index];
    cJSON *item = cJSON_CreateObject();
    if (node->leaf) {
        space_layout_add_number(item, "cell", node->cell_id);
        space_layout_add_number(item, "cellapp", (double)node->cellapp_id);
        if (node->retiring) cJSON_AddBoolToObject(item, "retiring", true);
        return item;
    }
    cJSON_AddStringToObject(item, "split", space_layout_axis_name(node->axis));
    space_layout_add_number(item, "at", node->at);
    if (node->aggression != 1.0) space_layout_add_number(item, "aggression", node->aggression);
    if (node->direction) space_layout_add_number(item, "direction", node->direction);
    cJSON_AddItemToObject(item, "low", space_layout_node_json(layout, node->low));
    cJSON_AddItemToObject(item, "high", space_layout_node_json(layout, node->high));
    return item;
}

char *space_layout_to_json(const space_layout *layout) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "name", layout->name);
    space_layout_add_number(root, "epoch", (double)layout->epoch);
    if (layout->fence) space_layout_add_number(root, "fence", (double)layout->fence);
    cJSON_AddBoolToObject(root, "three_d", layout->three_d);
    cJSON_AddItemToObject(root, "min", space_layout_triple_json(layout->min));
    cJSON_AddItemToObject(root, "max", space_layout_triple_json(layout->max));
    cJSON *spawn = cJSON_AddObjectToObject(root, "spawn");
    space_layout_add_number(spawn, "x", layout->spawn_x);
    space_layout_add_number(spawn, "z", layout->spawn_z);
    space_layout_add_number(spawn, "radius", layout->spawn_radius);
    space_layout_add_number(root, "next_cell", layout->next_cell_id);
    if (layout->root != SPACE_LAYOUT_NONE)
        cJSON_AddItemToObject(root, "tree", space_layout_node_json(layout, layout->root));
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text) log_panic("space '%s': cannot print its layout", layout->name);
    return text;
}

/* ---- geometry -------------------------------------------------------------- */

static space_layout_rect space_layout_bounds(const space_layout *layout) {
    return (space_layout_rect){layout->min[0], layout->min[2], layout->max[0], layout->max[2]};
}

/* The region of each side of a split. */
static void space_layout_split_rect(const space_layout_node *node, const space_layout_rect *region,
                                    space_layout_rect *low, space_layout_rect *high) {
    *low = *high = *region;
    if (node->axis == SPACE_LAYOUT_AXIS_X)
        low->max_x = high->min_x = node->at;
    else
        low->max_z = high->min_z = node->at;
}

double space_layout_rect_distance(const space_layout_rect *rect, double x, double z) {
    double dx = fmax(0.0, fmax(rect->min_x - x, x - rect->max_x));
    double dz = fmax(0.0, fmax(rect->min_z - z, z - rect->max_z));
    return fmax(dx, dz);
}

bool space_layout_rect_contains(const space_layout_rect *rect, double x, double z) {
    return x >= rect->min_x && x < rect->max_x && z >= rect->min_z && z < rect->max_z;
}

const space_layout_node *space_layout_cell_at(const space_layout *layout, double x, double z) {
    int32_t index = layout->root;
    if (index == SPACE_LAYOUT_NONE) return NULL;
    /* The upper edges of the region so far: a point on a line goes to the
     * line's high side, unless that side has no width (a cell squeezed
     * against the space's far edge), where nothing can be. */
    double max_x = layout->max[0], max_z = layout->max[2];
    while (!layout->nodes[index].leaf) {
        const space_layout_node *node = &layout->nodes[index];
        bool axis_x = node->axis == SPACE_LAYOUT_AXIS_X;
        double v = axis_x ? x : z;
        bool high = v >= node->at && node->at < (axis_x ? max_x : max_z);
        if (!high) {
            if (axis_x)
                max_x = node->at;
            else
                max_z = node->at;
        }
        index = high ? node->high : node->low;
    }
    return &layout->nodes[index];
}

const space_layout_node *space_layout_find_cell(const space_layout *layout, uint32_t cell_id) {
    for (int32_t i = 0; i < layout->node_count; i++)
        if (layout->nodes[i].leaf && layout->nodes[i].cell_id == cell_id) return &layout->nodes[i];
    return NULL;
}

const space_layout_node *space_layout_cell_of(const space_layout *layout, uint64_t cellapp_id) {
    for (int32_t i = 0; i < layout->node_count; i++)
        if (layout->nodes[i].leaf && layout->nodes[i].cellapp_id == cellapp_id) return &layout->nodes[i];
    return NULL;
}

static bool space_layout_find_rect(const space_layout *layout, int32_t index, space_layout_rect region,
                                   uint32_t cell_id, space_layout_rect *out) {
    const space_layout_node *node = &layout->nodes[index];
    if (node->leaf) {
        if (node->cell_id != cell_id) return false;
        *out = region;
        return true;
    }
    space_layout_rect low, high;
    space_layout_split_rect(node, &region, &low, &high);
    return space_layout_find_rect(layout, node->low, low, cell_id, out) ||
           space_layout_find_rect(layout, node->high, high, cell_id, out);
}

int space_layout_rect_of(const space_layout *layout, uint32_t cell_id, space_layout_rect *out) {
    if (layout->root == SPACE_LAYOUT_NONE) return -1;
    return space_layout_find_rect(layout, layout->root, space_layout_bounds(layout), cell_id, out) ? 0 : -1;
}

/* The pruning test of cells_near treats an edge region as open towards the
 * outside, as cell_at does for points beyond the bounds. */
static space_layout_rect space_layout_open_edges(const space_layout *layout, space_layout_rect r) {
    if (r.min_x <= layout->min[0]) r.min_x = -INFINITY;
    if (r.max_x >= layout->max[0]) r.max_x = INFINITY;
    if (r.min_z <= layout->min[2]) r.min_z = -INFINITY;
    if (r.max_z >= layout->max[2]) r.max_z = INFINITY;
    return r;
}

static void space_layout_collect_near(const space_layout *layout, int32_t index, space_layout_rect region, double x,
                                      double z, double distance, const space_layout_node **out, size_t cap,
                                      size_t *found) {
    space_layout_rect open = space_layout_open_edges(layout, region);
    if (space_layout_rect_distance(&open, x, z) > distance) return;
    const space_layout_node *node = &layout->nodes[index];
    if (node->leaf) {
        if (*found < cap) out[*found] = node;
        (*found)++;
        return;
    }
    space_layout_rect low, high;
    space_layout_split_rect(node, &region, &low, &high);
    space_layout_collect_near(layout, node->low, low, x, z, distance, out, cap, found);
    space_layout_collect_near(layout, node->high, high, x, z, distance, out, cap, found);
}

size_t space_layout_cells_near(const space_layout *layout, double x, double z, double distance,
                               const space_layout_node **out, size_t cap) {
    size_t found = 0;
    if (layout->root != SPACE_LAYOUT_NONE)
        space_layout_collect_near(layout, layout->root, space_layout_bounds(layout), x, z, distance, out, cap, &found);
    return found;
}

size_t space_layout_cell_count(const space_layout *layout) {
    size_t count = 0;
    for (int32_t i = 0; i < layout->node_count; i++) count += layout->nodes[i].leaf;
    return count;
}

size_t space_layout_split_count(const space_layout *layout) {
    return (size_t)layout->node_count - space_layout_cell_count(layout);
}

/* ---- checks ---------------------------------------------------------------- */

typedef struct space_layout_checker {
    const space_layout *layout;
    char *err;
    size_t errlen;
    int32_t visited;
} space_layout_checker;

static int space_layout_check_node(space_layout_checker *checker, int32_t index, space_layout_rect region, int depth) {
    const space_layout *layout = checker->layout;
    if (index < 0 || index >= layout->node_count || depth > SPACE_LAYOUT_MAX_DEPTH) {
        snprintf(checker->err, checker->errlen, "space '%s': the tree is broken (node %d)", layout->name, index);
        return -1;
    }
    checker->visited++;
    const space_layout_node *node = &layout->nodes[index];
    if (node->leaf) {
        if (node->cellapp_id == 0) {
            snprintf(checker->err, checker->errlen, "space '%s': cell %u has no cellapp", layout->name, node->cell_id);
            return -1;
        }
        return 0;
    }
    double low = node->axis == SPACE_LAYOUT_AXIS_X ? region.min_x : region.min_z;
    double high = node->axis == SPACE_LAYOUT_AXIS_X ? region.max_x : region.max_z;
    if (!(node->at >= low && node->at <= high)) {
        snprintf(checker->err, checker->errlen, "space '%s': a split at %s = %g lies outside its region %g .. %g",
                 layout->name, space_layout_axis_name(node->axis), node->at, low, high);
        return -1;
    }
    space_layout_rect low_rect, high_rect;
    space_layout_split_rect(node, &region, &low_rect, &high_rect);
    if (space_layout_check_node(checker, node->low, low_rect, depth + 1) != 0) return -1;
    return space_layout_check_node(checker, node->high, high_rect, depth + 1);
}

int space_layout_check(const space_layout *layout, char *err, size_t errlen) {
    if (!space_layout_valid_bounds(layout->min, layout->max)) {
        snprintf(err, errlen, "space '%s': every bound in min must be below its max", layout->name);
        return -1;
    }
    if (!(layout->spawn_radius >= 0) || !isfinite(layout->spawn_x) || !isfinite(layout->spawn_z) ||
        !isfinite(layout->spawn_radius) || layout->spawn_x - layout->spawn_radius < layout->min[0] ||
        layout->spawn_x + layout->spawn_radius > layout->max[0] ||
        layout->spawn_z - layout->spawn_radius < layout->min[2] ||
        layout->spawn_z + layout->spawn_radius > layout->max[2]) {
        snprintf(err, errlen, "space '%s': the spawn disc (%g, %g) radius %g does not lie inside the bounds",
                 layout->name, layout->spawn_x, layout->spawn_z, layout->spawn_radius);
        return -1;
    }
    if (layout->root == SPACE_LAYOUT_NONE) {
        snprintf(err, errlen, "space '%s' has no cells", layout->name);
        return -1;
    }
    space_layout_checker checker = {layout, err, errlen, 0};
    if (space_layout_check_node(&checker, layout->root, space_layout_bounds(layout), 0) != 0) return -1;
    if (checker.visited != layout->node_count) {
        snprintf(err, errlen, "space '%s': the tree is broken (%d nodes, %d reachable)", layout->name,
                 layout->node_count, checker.visited);
        return -1;
    }
    for (int32_t i = 0; i < layout->node_count; i++) {
        const space_layout_node *a = &layout->nodes[i];
        if (!a->leaf) continue;
        for (int32_t j = i + 1; j < layout->node_count; j++) {
            const space_layout_node *b = &layout->nodes[j];
            if (!b->leaf) continue;
            if (a->cell_id == b->cell_id) {
                snprintf(err, errlen, "space '%s': two cells have id %u", layout->name, a->cell_id);
                return -1;
            }
            if (a->cellapp_id == b->cellapp_id) {
                snprintf(err, errlen, "space '%s': cellapp %" PRIu64 " owns cells %u and %u (at most one each)",
                         layout->name, a->cellapp_id, a->cell_id, b->cell_id);
                return -1;
            }
        }
        if (a->cell_id >= layout->next_cell_id) {
            snprintf(err, errlen, "space '%s': cell %u is not below next_cell %u", layout->name, a->cell_id,
                     layout->next_cell_id);
            return -1;
        }
    }
    return 0;
}

int space_layout_check_owners(const space_layout *layout, bool (*is_alive)(uint64_t cellapp_id, void *context),
                              void *context, char *err, size_t errlen) {
    for (int32_t i = 0; i < layout->node_count; i++) {
        const space_layout_node *node = &layout->nodes[i];
        if (node->leaf && !is_alive(node->cellapp_id, context)) {
            snprintf(err, errlen, "space '%s': cell %u names cellapp %" PRIu64 ", which is not alive", layout->name,
                     node->cell_id, node->cellapp_id);
            return -1;
        }
    }
    return 0;
}

/* ---- edits ----------------------------------------------------------------- */

/* Finds split number `wanted` in pre-order, with its region. */
static int32_t space_layout_find_split(const space_layout *layout, int32_t index, space_layout_rect region,
                                       uint32_t wanted, uint32_t *counter, space_layout_rect *out) {
    const space_layout_node *node = &layout->nodes[index];
    if (node->leaf) return SPACE_LAYOUT_NONE;
    if ((*counter)++ == wanted) {
        *out = region;
        return index;
    }
    space_layout_rect low, high;
    space_layout_split_rect(node, &region, &low, &high);
    int32_t found = space_layout_find_split(layout, node->low, low, wanted, counter, out);
    if (found != SPACE_LAYOUT_NONE) return found;
    return space_layout_find_split(layout, node->high, high, wanted, counter, out);
}

int space_layout_split_info(const space_layout *layout, uint32_t split, space_layout_axis *axis, double *at,
                            double *region_min, double *region_max) {
    if (layout->root == SPACE_LAYOUT_NONE) return -1;
    uint32_t counter = 0;
    space_layout_rect region;
    int32_t index =
        space_layout_find_split(layout, layout->root, space_layout_bounds(layout), split, &counter, &region);
    if (index == SPACE_LAYOUT_NONE) return -1;
    const space_layout_node *node = &layout->nodes[index];
    *axis = node->axis;
    *at = node->at;
    *region_min = node->axis == SPACE_LAYOUT_AXIS_X ? region.min_x : region.min_z;
    *region_max = node->axis == SPACE_LAYOUT_AXIS_X ? region.max_x : region.max_z;
    return 0;
}

/* Whether moving split `index` to `at` keeps every split below it inside its
 * region. */
static bool space_layout_subtree_fits(const space_layout *layout, int32_t index, space_layout_rect region) {
    const space_layout_node *node = &layout->nodes[index];
    if (node->leaf) return true;
    double low = node->axis == SPACE_LAYOUT_AXIS_X ? region.min_x : region.min_z;
    double high = node->axis == SPACE_LAYOUT_AXIS_X ? region.max_x : region.max_z;
    if (!(node->at >= low && node->at <= high)) return false;
    space_layout_rect low_rect, high_rect;
    space_layout_split_rect(node, &region, &low_rect, &high_rect);
    return space_layout_subtree_fits(layout, node->low, low_rect) &&
           space_layout_subtree_fits(layout, node->high, high_rect);
}

int space_layout_move_split(space_layout *layout, uint32_t split, double at, char *err, size_t errlen) {
    space_layout_axis axis;
    double old_at, low, high;
    if (space_layout_split_info(layout, split, &axis, &old_at, &low, &high) != 0) {
        snprintf(err, errlen, "space '%s' has no split %u (it has %zu)", layout->name, split,
                 space_layout_split_count(layout));
        return -1;
    }
    if (!isfinite(at) || at < low || at > high) {
        snprintf(err, errlen, "space '%s': split %u (%s) can move within %g .. %g, not to %g", layout->name, split,
                 space_layout_axis_name(axis), low, high, at);
        return -1;
    }
    uint32_t counter = 0;
    space_layout_rect region;
    int32_t index =
        space_layout_find_split(layout, layout->root, space_layout_bounds(layout), split, &counter, &region);
    layout->nodes[index].at = at;
    if (!space_layout_subtree_fits(layout, index, region)) {
        layout->nodes[index].at = old_at;
        snprintf(err, errlen, "space '%s': split %u at %g would cross a split inside it; move that one first",
                 layout->name, split, at);
        return -1;
    }
    return 0;
}

int space_layout_assign(space_layout *layout, uint32_t cell_id, uint64_t cellapp_id, char *err, size_t errlen) {
    const space_layout_node *cell = space_layout_find_cell(layout, cell_id);
    if (!cell) {
        snprintf(err, errlen, "space '%s' has no cell %u", layout->name, cell_id);
        return -1;
    }
    const space_layout_node *other = space_layout_cell_of(layout, cellapp_id);
    if (cellapp_id == 0 || (other && other != cell)) {
        snprintf(err, errlen, "space '%s': cellapp %" PRIu64 " cannot take cell %u%s", layout->name, cellapp_id,
                 cell_id, cellapp_id == 0 ? "" : " (it owns another cell of the space)");
        return -1;
    }
    ((space_layout_node *)cell)->cellapp_id = cellapp_id;
    return 0;
}

/* How many splits lie above cell `cell_id` (found as rect_of finds it), or
 * -1 if it is not below `index`. */
static int space_layout_depth_of(const space_layout *layout, int32_t index, uint32_t cell_id, int depth) {
    const space_layout_node *node = &layout->nodes[index];
    if (node->leaf) return node->cell_id == cell_id ? depth : -1;
    int found = space_layout_depth_of(layout, node->low, cell_id, depth + 1);
    return found >= 0 ? found : space_layout_depth_of(layout, node->high, cell_id, depth + 1);
}

int space_layout_split_cell(space_layout *layout, uint32_t cell_id, space_layout_axis axis, double at,
                            uint64_t cellapp_id, char *err, size_t errlen) {
    space_layout_rect rect;
    if (space_layout_rect_of(layout, cell_id, &rect) != 0) {
        snprintf(err, errlen, "space '%s' has no cell %u", layout->name, cell_id);
        return -1;
    }
    /* A deeper tree would fail space_layout_check and space_layout_from_json. */
    if (space_layout_depth_of(layout, layout->root, cell_id, 0) >= SPACE_LAYOUT_MAX_DEPTH) {
        snprintf(err, errlen, "space '%s': cell %u is %d splits deep, the most a layout may be", layout->name, cell_id,
                 SPACE_LAYOUT_MAX_DEPTH);
        return -1;
    }
    double low = axis == SPACE_LAYOUT_AXIS_X ? rect.min_x : rect.min_z;
    double high = axis == SPACE_LAYOUT_AXIS_X ? rect.max_x : rect.max_z;
    if (!isfinite(at) || at < low || at > high) {
        snprintf(err, errlen, "space '%s': cell %u spans %g .. %g on %s; %g is outside", layout->name, cell_id, low,
                 high, space_layout_axis_name(axis), at);
        return -1;
    }
    if (cellapp_id == 0 || space_layout_cell_of(layout, cellapp_id)) {
        snprintf(err, errlen, "space '%s': cellapp %" PRIu64 " cannot take a new cell%s", layout->name, cellapp_id,
                 cellapp_id == 0 ? "" : " (it owns a cell of the space)");
        return -1;
    }
    int32_t leaf = (int32_t)(space_layout_find_cell(layout, cell_id) - layout->nodes);
    int32_t low_child = space_layout_add_leaf(layout, cell_id, layout->nodes[leaf].cellapp_id);
    int32_t high_child = space_layout_add_leaf(layout, layout->next_cell_id++, cellapp_id);
    space_layout_node *node = &layout->nodes[leaf];
    node->leaf = false;
    node->cell_id = 0;
    node->cellapp_id = 0;
    node->retiring = false;
    node->aggression = 1.0;
    node->direction = 0;
    node->axis = axis;
    node->at = at;
    node->low = low_child;
    node->high = high_child;
    return 0;
}

/* Copies the subtree at `index` of `from` into `to`; returns its index there. */
static int32_t space_layout_copy_subtree(space_layout *to, const space_layout *from, int32_t index) {
    const space_layout_node *node = &from->nodes[index];
    int32_t copy = space_layout_add_node(to);
    to->nodes[copy] = *node;
    if (node->leaf) return copy;
    int32_t low = space_layout_copy_subtree(to, from, node->low);
    int32_t high = space_layout_copy_subtree(to, from, node->high);
    to->nodes[copy].low = low;
    to->nodes[copy].high = high;
    return copy;
}

/* The index of the split whose child is `child`, or SPACE_LAYOUT_NONE. */
static int32_t space_layout_parent_of(const space_layout *layout, int32_t child) {
    for (int32_t i = 0; i < layout->node_count; i++)
        if (!layout->nodes[i].leaf && (layout->nodes[i].low == child || layout->nodes[i].high == child)) return i;
    return SPACE_LAYOUT_NONE;
}

int space_layout_remove_cell(space_layout *layout, uint32_t cell_id, char *err, size_t errlen) {
    const space_layout_node *cell = space_layout_find_cell(layout, cell_id);
    if (!cell) {
        snprintf(err, errlen, "space '%s' has no cell %u", layout->name, cell_id);
        return -1;
    }
    int32_t leaf = (int32_t)(cell - layout->nodes);
    int32_t parent = space_layout_parent_of(layout, leaf);
    if (parent == SPACE_LAYOUT_NONE) {
        snprintf(err, errlen, "space '%s': cell %u is its only cell", layout->name, cell_id);
        return -1;
    }
    /* The sibling takes the parent's place; the array is rebuilt without
     * the two nodes that went. */
    int32_t sibling = layout->nodes[parent].low == leaf ? layout->nodes[parent].high : layout->nodes[parent].low;
    space_layout *old = space_layout_copy(layout);
    old->nodes[parent] = old->nodes[sibling];
    layout->node_count = 0;
    layout->root = space_layout_copy_subtree(layout, old, old->root);
    space_layout_free(old);
    return 0;
}

int space_layout_set_retiring(space_layout *layout, uint32_t cell_id, bool retiring, char *err, size_t errlen) {
    const space_layout_node *cell = space_layout_find_cell(layout, cell_id);
    if (!cell) {
        snprintf(err, errlen, "space '%s' has no cell %u", layout->name, cell_id);
        return -1;
    }
    ((space_layout_node *)cell)->retiring = retiring;
    return 0;
}

double space_layout_cell_area(const space_layout *layout, uint32_t cell_id) {
    space_layout_rect rect;
    if (space_layout_rect_of(layout, cell_id, &rect) != 0) return -1;
    return (rect.max_x - rect.min_x) * (rect.max_z - rect.min_z);
}

/* ---- printing -------------------------------------------------------------- */

static void space_layout_print_node(const space_layout *layout, int32_t index, space_layout_rect region, int depth,
                                    uint32_t *split_counter, FILE *out) {
    const space_layout_node *node = &layout->nodes[index];
    fprintf(out, "%*s", depth * 2, "");
    if (node->leaf) {
        fprintf(out, "cell %u on cellapp %" PRIu64 ": x %g .. %g, z %g .. %g%s\n", node->cell_id, node->cellapp_id,
                region.min_x, region.max_x, region.min_z, region.max_z, node->retiring ? " (retiring)" : "");
        return;
    }
    double low = node->axis == SPACE_LAYOUT_AXIS_X ? region.min_x : region.min_z;
    double high = node->axis == SPACE_LAYOUT_AXIS_X ? region.max_x : region.max_z;
    fprintf(out, "split %u: %s = %g (region %g .. %g)", (*split_counter)++, space_layout_axis_name(node->axis),
            node->at, low, high);
    if (node->direction || node->aggression != 1.0)
        fprintf(out, " aggression %.3g, last moved %s", node->aggression,
                node->direction < 0   ? "low"
                : node->direction > 0 ? "high"
                                      : "-");
    fprintf(out, "\n");
    space_layout_rect low_rect, high_rect;
    space_layout_split_rect(node, &region, &low_rect, &high_rect);
    space_layout_print_node(layout, node->low, low_rect, depth + 1, split_counter, out);
    space_layout_print_node(layout, node->high, high_rect, depth + 1, split_counter, out);
}

void space_layout_print(const space_layout *layout, FILE *out) {
    char fence[48] = "";
    if (layout->fence) snprintf(fence, sizeof fence, ", balancer lease %" PRIu64, layout->fence);
    fprintf(out, "space %s (epoch %" PRIu64 "%s, %s): x %g .. %g, y %g .. %g, z %g .. %g, spawn (%g, %g) r %g\n",
            layout->name, layout->epoch, fence, layout->three_d ? "3D" : "2D", layout->min[0], layout->max[0],
            layout->min[1], layout->max[1], layout->min[2], layout->max[2], layout->spawn_x, layout->spawn_z,
            layout->spawn_radius);
    uint32_t counter = 0;
    if (layout->root != SPACE_LAYOUT_NONE)
        space_layout_print_node(layout, layout->root, space_layout_bounds(layout), 1, &counter, out);
}
