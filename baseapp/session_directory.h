/* session_directory.h -- which baseapp holds an account's client now, in
 * Redis (P session:<account> = "<baseapp id>:<claims>", redis_keys.h): a
 * login elsewhere reads it to send the client where the account's entity
 * lives.
 *
 * One life per account rests on the claim: a baseapp makes or keeps an
 * account's session only after claiming the entry, in one atomic step
 * that refuses while another baseapp may still hold it. The entry is
 * claimable when it is empty, names this baseapp, names a baseapp that
 * left the cluster (not among P processes: it stopped, its registration
 * went), or names one the cluster declared dead (P dead) -- for a login
 * only once SESSION_DIRECTORY_RESTORE_WINDOW_MS have passed since, as the
 * holder of its backups restores its sessions in that time and claims them
 * itself. A claim may also name the one holder it replaces: the baseapp
 * that handed its client here (a giveClientTo across baseapps) gives the
 * session up by sending it.
 * A baseapp whose lease merely lapsed is still among P processes
 * (only a death decision takes it out), so a stalled or cut-off holder
 * keeps its accounts until the cluster has decided. The number after the
 * colon counts claims: each one is a new incarnation of the session.
 *
 * A release deletes the entry only while it still names this baseapp. */
#ifndef TESSERA_SESSION_DIRECTORY_H
#define TESSERA_SESSION_DIRECTORY_H

#include <stdbool.h>
#include <stdint.h>

#include "process_self.h"
#include "redis_client.h"

/* How long after a baseapp's death its accounts wait for their restore
 * before a login may start them afresh from the database. */
#define SESSION_DIRECTORY_RESTORE_WINDOW_MS 10000

typedef struct session_directory {
    redis_client *redis;
    const char *cluster_name;
    const process_self *self;
} session_directory;

typedef enum session_claim_kind {
    SESSION_CLAIM_LOGIN,   /* a login or a binding here: a dead holder's accounts wait for their restore */
    SESSION_CLAIM_RESTORE, /* a dead baseapp's session restored here from its backup */
} session_claim_kind;

typedef struct session_claim_result {
    bool failed;           /* Redis did not answer: nothing is known */
    bool claimed;          /* the entry names this baseapp now */
    uint64_t holder;       /* refused: the baseapp that holds the account */
    bool holder_restoring; /* refused: that holder is dead, its sessions being restored */
    uint64_t incarnation;  /* claimed: the claim's number */
} session_claim_result;

typedef void (*session_claim_done)(const session_claim_result *result, void *user_data);

/* Claims `account`'s session for baseapp `claimant` (0: this one) --
 * a login routed to another baseapp is claimed for it before the client
 * is sent, so two logins that cross cannot both win -- replacing `from`
 * too (the baseapp that handed the client over; 0: none); `done` (may be
 * NULL: a refusal is then only logged) hears how it went. Returns 0, or -1
 * when Redis is not connected (`done` is not called). */
int session_directory_claim(const session_directory *directory, const char *account, session_claim_kind kind,
                            uint64_t claimant, uint64_t from, session_claim_done done, void *user_data);
/* ... no longer (unless another baseapp claimed it meanwhile). */
void session_directory_release(const session_directory *directory, const char *account);
/* The holder an entry's value names (0 for none or a malformed one). */
uint64_t session_directory_holder(const char *value);

#endif
