/* alias_table.h -- per-client small alias ids for entities (Source's edict
 * index on the client wire).
 *
 * The per-tick stream names entities by small numbers rather than 64-bit
 * ids. Each client has its own table: an entity entering the client's view
 * gets the lowest free alias, and keeps it while in view. A released alias
 * cools down for `cooldown_ms` before it can name another entity (Source
 * waits one second before reusing an edict), so a record that was in flight
 * for the old entity can never be applied to a new one; the client drops
 * records for aliases it does not know.
 */
#ifndef TESSERA_ALIAS_TABLE_H
#define TESSERA_ALIAS_TABLE_H

#include <stdint.h>

#define ALIAS_NONE UINT32_MAX

typedef struct alias_table alias_table;

/* A table handing out aliases 0 .. max_aliases-1. NULL on bad arguments. */
alias_table *alias_table_create(uint32_t max_aliases, uint64_t cooldown_ms);
void alias_table_free(alias_table *table);

/* The alias of `entity_id`, assigning the lowest one free and cooled down if
 * it has none. Returns ALIAS_NONE when every alias is in use or cooling. */
uint32_t alias_table_assign(alias_table *table, uint64_t entity_id, uint64_t now_ms);
/* Releases the entity's alias; it may name another entity from
 * now_ms + cooldown_ms on. Times come from a monotonic clock (a release
 * stamped earlier than the previous one only ever cools later, never
 * sooner). Returns the alias, or ALIAS_NONE if it had none. */
uint32_t alias_table_release(alias_table *table, uint64_t entity_id, uint64_t now_ms);
/* The entity's alias, or ALIAS_NONE. */
uint32_t alias_table_find(const alias_table *table, uint64_t entity_id);
/* The entity an alias names now, or 0 if it is free or cooling. */
uint64_t alias_table_entity(const alias_table *table, uint32_t alias);
uint32_t alias_table_in_use(const alias_table *table);

/* The table's contents, for moving a client's witness to another cellapp:
 * aliases below next_unused were handed out at some time; of those, the
 * ones in use name an entity (alias_table_entity), the cooling ones are
 * listed oldest first with the time each has left at now_ms, and the rest
 * are free. */
typedef struct alias_table_cooling_entry {
    uint32_t alias;
    uint64_t remaining_ms;
} alias_table_cooling_entry;

uint32_t alias_table_next_unused(const alias_table *table);
/* Writes at most `cap` cooling aliases, oldest first; returns how many cool. */
uint32_t alias_table_cooling(const alias_table *table, uint64_t now_ms, alias_table_cooling_entry *out, uint32_t cap);
/* A table holding those contents: entity_of[alias] for alias < next_unused
 * (0: not in use), then the cooling list. NULL when they do not fit
 * (next_unused above max_aliases, an entity twice, a cooling alias in use
 * or listed twice). */
alias_table *alias_table_restore(uint32_t max_aliases, uint64_t cooldown_ms, uint32_t next_unused,
                                 const uint64_t *entity_of, const alias_table_cooling_entry *cooling,
                                 uint32_t cooling_count, uint64_t now_ms);

#endif
