/* state_dump.h -- every real's and ghost's state on this cellapp written to
 * a JSON file, for an operator (SIGUSR1) or a test (state_dump.c).
 */
#ifndef TESSERA_STATE_DUMP_H
#define TESSERA_STATE_DUMP_H

#include <stdint.h>

#include "spaces.h"

/* Writes the entities of every cell of `s` to `path` (empty: only logs
 * that there is none), naming this process `process_id`. Returns 0, or -1
 * (logged). */
int state_dump_write(const spaces *s, const char *path, uint64_t process_id);

#endif
