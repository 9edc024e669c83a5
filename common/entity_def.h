/* entity_def.h -- entity type definitions read from JSON: the value types,
 * the properties with their KBEngine flags, the base/cell/client methods,
 * a digest of the whole set, and the self-description sent to clients.
 *
 * A registry is loaded once (from a directory of *.json files, one file, or
 * a string) and is read-only afterwards; it owns everything it hands out.
 * Pointers into it stay valid until entity_def_registry_free. What crosses a
 * process boundary is a class id, property id or method id, never a pointer.
 *
 * This module does not store property values, encode them, or decide who is
 * in view: it only says what exists and who may see it. The JSON format is
 * documented in demo/entities/README.md and at the top of entity_def.c.
 *
 * Words: a "class" is an entity type (Avatar, Npc); a "type" is the type of
 * a value (uint16, string, a struct, an array). A "struct" is a named record
 * type declared once in a "types" section and referenced by name.
 */
#ifndef TESSERA_ENTITY_DEF_H
#define TESSERA_ENTITY_DEF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* Names (classes, structs, properties, methods, arguments, fields) are
 * identifiers of at most 63 bytes: they travel in the login description, and
 * no game needs longer ones. */
#define ENTITY_DEF_NAME_MAX 63

/* At most 256 properties per class, methods per part, fields per struct and
 * arguments per method, so that every id fits in one byte on the wire and a
 * class's change mask is at most 32 bytes. */
#define ENTITY_DEF_MAX_MEMBERS 256

/* At most 4096 game events (a document's "events"): Source games declare a
 * few hundred; the id travels as a varint. */
#define ENTITY_DEF_MAX_EVENTS 4096

/* String and bytes max_length is 1..65535: the length prefix on the wire is
 * 16 bits at most. */
#define ENTITY_DEF_MAX_LENGTH 65535

/* A fixed array holds 1..1024 elements: an array is one property, resent as
 * a block when it changes, and larger blocks do not fit a client's per-tick
 * budget anyway. */
#define ENTITY_DEF_MAX_ARRAY 1024

/* A value holds at most 4096 scalars once arrays and structs are flattened
 * (value_count below): a property is resent as one block, and 4096 values
 * already exceed a client's whole 4 KB/s budget. The cap also keeps a few
 * bytes of nested arrays from expanding into millions of default values. */
#define ENTITY_DEF_MAX_VALUES 4096

/* Digest size: BLAKE2b-256 (libsodium crypto_generichash). */
#define ENTITY_DEF_DIGEST_BYTES 32

/* Value kinds. The numbers are part of the digest's canonical form: never
 * renumber them (append new kinds at the end). */
typedef enum entity_def_kind {
    ENTITY_DEF_INT8 = 0,
    ENTITY_DEF_INT16 = 1,
    ENTITY_DEF_INT32 = 2,
    ENTITY_DEF_INT64 = 3,
    ENTITY_DEF_UINT8 = 4,
    ENTITY_DEF_UINT16 = 5,
    ENTITY_DEF_UINT32 = 6,
    ENTITY_DEF_UINT64 = 7,
    ENTITY_DEF_FLOAT = 8,
    ENTITY_DEF_DOUBLE = 9,
    ENTITY_DEF_BOOL = 10,
    ENTITY_DEF_STRING = 11,  /* UTF-8 text, at most max_length bytes */
    ENTITY_DEF_BYTES = 12,   /* opaque bytes, at most max_length */
    ENTITY_DEF_VECTOR2 = 13, /* two floats (x, y) */
    ENTITY_DEF_VECTOR3 = 14, /* three floats (x, y, z) */
    ENTITY_DEF_ENTITY = 15,  /* a reference to an entity: its 64-bit id, 0 = none */
    ENTITY_DEF_ARRAY = 16,   /* `count` elements of one type */
    ENTITY_DEF_STRUCT = 17,  /* a named struct declared in "types" */
} entity_def_kind;

typedef struct entity_def_struct entity_def_struct;
typedef struct entity_def_type entity_def_type;

/* The type of one value. Only the fields for its kind are meaningful. */
struct entity_def_type {
    entity_def_kind kind;
    /* Bits of one value (per component for vectors) when it is packed:
     * integers: the declared bit width, else the natural one (8..64);
     * float/double/vectors: the quantized bit count, else 32 (64 for double);
     * bool: 1; entity: 64; string, bytes, array, struct: 0 (their size is
     * not a fixed bit count). */
    unsigned bits;
    /* Integers: the range the bit width allows, both ends inclusive. A write
     * outside it is an error (it never wraps). For unsigned kinds int_min is
     * 0; for signed kinds int_max is below 2^63. */
    int64_t int_min;
    uint64_t int_max;
    /* float, double, vector2, vector3: quantization, per component. When
     * `quantized`, a value must lie in [quant_min, quant_max] and is sent as
     * round((v - quant_min) / quant_precision) in `bits` bits. */
    bool quantized;
    double quant_min, quant_max, quant_precision;
    /* Scalars in one value once arrays and structs are flattened: 1 for the
     * other kinds (a string, bytes or vector counts as one); at most
     * ENTITY_DEF_MAX_VALUES. */
    uint32_t value_count;
    uint32_t max_length;                /* string, bytes: 1..ENTITY_DEF_MAX_LENGTH */
    uint32_t count;                     /* array: 1..ENTITY_DEF_MAX_ARRAY */
    entity_def_type *element;           /* array: the element type */
    const entity_def_struct *structure; /* struct: its declaration */
};

/* A field of a struct. `default_value` is the full default (see
 * entity_def_property). */
typedef struct entity_def_field {
    char *name;
    entity_def_type type;
    cJSON *default_value;
} entity_def_field;

struct entity_def_struct {
    char *name;
    uint16_t index;           /* position in the registry's struct list (sorted by name) */
    entity_def_field *fields; /* declaration order: this is the layout */
    size_t field_count;
    uint32_t value_count; /* sum of the fields' value_count */
};

/* The KBEngine property flags: where a property lives and who receives it.
 * Exactly one per property. The numbers are part of the digest. */
typedef enum entity_def_flags {
    /* On the base only. Never sent to a client or a cell. */
    ENTITY_DEF_FLAG_BASE = 0,
    /* On the base, and sent by the base to the owner's client. */
    ENTITY_DEF_FLAG_BASE_AND_CLIENT = 1,
    /* On the cell only. Never leaves the cell, not even to ghosts. */
    ENTITY_DEF_FLAG_CELL_PRIVATE = 2,
    /* On the cell and copied to its ghosts; no client gets it. */
    ENTITY_DEF_FLAG_CELL_PUBLIC = 3,
    /* On the cell, its ghosts, and the owner's client. */
    ENTITY_DEF_FLAG_CELL_PUBLIC_AND_OWN = 4,
    /* On the cell, its ghosts, the owner's client and every client that
     * sees the entity. */
    ENTITY_DEF_FLAG_ALL_CLIENTS = 5,
    /* On the cell and the owner's client only (not ghosts). */
    ENTITY_DEF_FLAG_OWN_CLIENT = 6,
    /* On the cell, its ghosts and every client that sees the entity, but
     * never the owner's client. */
    ENTITY_DEF_FLAG_OTHER_CLIENTS = 7,
} entity_def_flags;

#define ENTITY_DEF_FLAG_COUNT 8

/* Who holds and who receives a property, derived from its flags. */
typedef struct entity_def_audience {
    bool on_base;          /* the base part holds the value */
    bool on_cell;          /* the cell part (the real) holds the value */
    bool to_ghosts;        /* copied to the entity's ghosts on other cells */
    bool to_own_client;    /* sent to the client that owns the entity */
    bool to_other_clients; /* sent to the other clients that see the entity */
} entity_def_audience;

/* Detail levels: how close an observer must be to receive a property that
 * other clients see. An observer at a coarser level does not get it, and
 * gets it, current, when it comes near enough. The own client always gets
 * every property it may see. The numbers are part of the digest. */
typedef enum entity_def_detail {
    ENTITY_DEF_DETAIL_NEAR = 0,   /* only near observers */
    ENTITY_DEF_DETAIL_MEDIUM = 1, /* near and medium observers */
    ENTITY_DEF_DETAIL_FAR = 2,    /* everyone in view (the default) */
} entity_def_detail;

typedef struct entity_def_property {
    char *name;
    uint16_t id; /* index in declaration order within its class */
    entity_def_type type;
    entity_def_flags flags;
    entity_def_audience audience; /* entity_def_property_audience(flags) */
    bool persistent;              /* saved to the database */
    entity_def_detail detail;     /* ENTITY_DEF_DETAIL_FAR unless declared */
    /* The full default value as JSON, normalised: integers and floats are
     * numbers, bool a boolean, string a string, bytes a lowercase hex string,
     * vectors arrays of 2 or 3 numbers, entity 0, arrays arrays of exactly
     * `count` values, structs objects with every field in declaration order.
     * Never NULL. */
    cJSON *default_value;
} entity_def_property;

typedef enum entity_def_part {
    ENTITY_DEF_PART_BASE = 0,
    ENTITY_DEF_PART_CELL = 1,
    ENTITY_DEF_PART_CLIENT = 2,
} entity_def_part;

#define ENTITY_DEF_PART_COUNT 3

typedef struct entity_def_arg {
    char *name;
    entity_def_type type;
} entity_def_arg;

/* An entity type. */
typedef struct entity_def_class {
    char *name;
    uint16_t id;        /* index in load order */
    const char *source; /* the file (or string name) it was declared in */
    struct entity_def_property *properties;
    size_t property_count;
    struct entity_def_method *methods[ENTITY_DEF_PART_COUNT];
    size_t method_count[ENTITY_DEF_PART_COUNT];
} entity_def_class;

typedef struct entity_def_method {
    char *name;
    uint16_t id; /* index in declaration order within its part */
    entity_def_part part;
    bool exposed; /* a client may call it (base and cell methods only) */
    entity_def_arg *args;
    size_t arg_count;
    /* The arguments seen as a class whose properties are the arguments, in
     * order (id UINT16_MAX, no methods): an entity_state of it holds one
     * call's arguments (method_call.h). */
    struct entity_def_class args_class;
} entity_def_method;

typedef struct entity_def_registry entity_def_registry;

/* ---- loading ---------------------------------------------------------- */

/* Loads every *.json file of directory `path` (not its subdirectories, not
 * names starting with '.'), in byte order of their names, as one set: a
 * struct declared in one file can be used in another, and class ids follow
 * the file order, then the declaration order within a file. Loading is all
 * or nothing. Returns 0 and a registry in *out that the caller frees with
 * entity_def_registry_free, or -1 with a message in err (at most errlen
 * bytes) naming the file, the class or struct, the member and the problem,
 * and *out set to NULL. A directory without *.json files is an error. */
int entity_def_load_directory(const char *path, entity_def_registry **out, char *err, size_t errlen);

/* Loads one file, as entity_def_load_directory does. */
int entity_def_load_file(const char *path, entity_def_registry **out, char *err, size_t errlen);

/* Loads one document from `text`; `source` names it in error messages (for
 * example "login description"). Otherwise as entity_def_load_directory. */
int entity_def_load_string(const char *text, const char *source, entity_def_registry **out, char *err, size_t errlen);

/* Frees the registry and everything in it. NULL is allowed. */
void entity_def_registry_free(entity_def_registry *registry);

/* ---- the wire --------------------------------------------------------- */

/* The BLAKE2b-256 digest of the registry's canonical form (documented in
 * entity_def.c): it depends on what the definitions mean, not on how the
 * files are written (whitespace, key order within an object, "bits" equal
 * to the natural width, defaults spelled out or implied, struct declaration
 * order and which file declares them). It changes with any name, type,
 * flag, detail level, persistence, default, id or exposed mark. */
const uint8_t *entity_def_registry_digest(const entity_def_registry *registry);
/* The same, as 64 lowercase hex digits. Owned by the registry. */
const char *entity_def_registry_digest_hex(const entity_def_registry *registry);

/* Describes every struct and class as one compact JSON document in the
 * loader's own format (the text the baseapp sends at login), leaving out
 * what the loader fills in by itself: defaults equal to the implied one,
 * "bits" equal to the natural width, "persistent": false, "detail": "far",
 * empty sections. Numbers are written exactly (shortest text that reads
 * back as the same double). Loading the text with entity_def_load_string
 * gives a registry with the same digest, class ids, property ids and method
 * ids. Returns a NUL-terminated string the caller frees with free(). */
char *entity_def_registry_describe(const entity_def_registry *registry);

/* ---- lookup ----------------------------------------------------------- */

size_t entity_def_registry_class_count(const entity_def_registry *registry);
/* The class with this id, or NULL when out of range. */
const entity_def_class *entity_def_registry_class(const entity_def_registry *registry, uint16_t id);
/* The class with this name, or NULL. */
const entity_def_class *entity_def_registry_find_class(const entity_def_registry *registry, const char *name);

size_t entity_def_registry_struct_count(const entity_def_registry *registry);
/* The struct at this index (sorted by name), or NULL when out of range. */
const entity_def_struct *entity_def_registry_struct(const entity_def_registry *registry, size_t index);
const entity_def_struct *entity_def_registry_find_struct(const entity_def_registry *registry, const char *name);

/* The property with this id or name, or NULL. */
const entity_def_property *entity_def_class_property(const entity_def_class *cls, uint16_t id);
const entity_def_property *entity_def_class_find_property(const entity_def_class *cls, const char *name);

/* The method of `part` with this id or name, or NULL (also for a bad part). */
const entity_def_method *entity_def_class_method(const entity_def_class *cls, entity_def_part part, uint16_t id);
const entity_def_method *entity_def_class_find_method(const entity_def_class *cls, entity_def_part part,
                                                      const char *name);

/* Game events: named, typed messages the server fires (cellapp/game_event.h).
 * Each is an entity_def_method of part CLIENT, never exposed, whose args are
 * the event's fields and whose id is its place in document order, so an
 * entity_state of its args_class holds one firing's fields and
 * method_call_encode codes them. */
size_t entity_def_registry_event_count(const entity_def_registry *registry);
/* The event with this id, or NULL when out of range. */
const entity_def_method *entity_def_registry_event(const entity_def_registry *registry, uint32_t id);
/* The event with this name, or NULL (also for a NULL name). */
const entity_def_method *entity_def_registry_find_event(const entity_def_registry *registry, const char *name);

/* ---- helpers ---------------------------------------------------------- */

/* Who holds and receives a property with these flags (the table is in the
 * comments of entity_def_flags). An out-of-range value gives all false. */
entity_def_audience entity_def_property_audience(entity_def_flags flags);

/* Bits needed to send a value of [min, max] at `precision`:
 * ceil(log2((max - min) / precision + 1)), with a tolerance of 1e-12 relative
 * for the rounding of the division (so 0..255 at 1 is 8 bits, not 9).
 * Returns 1..64, or -1 if min/max/precision are not finite, max <= min,
 * precision <= 0, or more than 64 bits would be needed. */
int entity_def_quantization_bits(double min, double max, double precision);

/* Names as written in JSON ("uint16", "ALL_CLIENTS", "near", "cell"), or
 * "?" for a value out of range. */
const char *entity_def_kind_name(entity_def_kind kind);
const char *entity_def_flags_name(entity_def_flags flags);
const char *entity_def_detail_name(entity_def_detail detail);
const char *entity_def_part_name(entity_def_part part);

#endif
