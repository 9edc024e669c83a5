/* process_self.h -- who this process is, as its modules need to know: its
 * process id in the registry (0 until it has registered) and whether it is
 * stopping (a callback that arrives while it stops does nothing). The
 * process owns one and sets it; its modules keep a const pointer to it, so
 * none needs the process itself to learn its own id.
 */
#ifndef TESSERA_PROCESS_SELF_H
#define TESSERA_PROCESS_SELF_H

#include <stdbool.h>
#include <stdint.h>

typedef struct process_self {
    uint64_t process_id; /* 0 until registered */
    bool stopping;       /* the orderly shutdown has begun */
} process_self;

#endif
