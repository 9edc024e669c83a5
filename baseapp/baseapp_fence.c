/* baseapp_fence.c -- self-fencing for a baseapp: it owns the fenced flag's
 * changes and what they stop and restart.
 *
 * A baseapp stalled past its lease (a long pause, SIGSTOP, a host cut off)
 * comes back not knowing whether it was declared dead meanwhile. Until the
 * registry answers (its renewal granted: unfenced; refused: the runtime
 * rejoins as a new process and its clients reconnect to the baseapps that
 * restored their bases) it does nothing as an owner:
 *   - its clients' frames are held, unread (the channel gate), so no
 *     client call, move or login is acted on or lost;
 *   - the sweep (the game's tick, timers, autosaves, retries, graces) and
 *     the base backups are skipped (main.c);
 * and what it had already sent to Redis is refused there if it arrives
 * after the death was declared (persistence.c writes only while this
 * process is not in the dead set). */
#include "baseapp_fence.h"

#include "clock.h"
#include "log.h"

bool baseapp_fence_check(baseapp *app, uint64_t now_us) {
    bool fenced = process_runtime_fenced(&app->runtime, now_us);
    if (fenced == app->fenced) return fenced;
    app->fenced = fenced;
    if (fenced) {
        app->fences++;
        log_warn("fenced: this baseapp's lease lapsed and it may be declared dead: it acts for none of its %zu "
                 "bases and holds what its %zu clients send until its lease is back",
                 base_entities_count(app->bases), client_links_count(app->links));
    } else {
        log_info("unfenced: the lease is back; acting for its bases again and reading its clients");
        client_links_release(app->links);
    }
    return fenced;
}

bool baseapp_fence_may_dispatch(void *owner) {
    baseapp *app = owner;
    if (app->runtime.self.stopping) return true;
    return !baseapp_fence_check(app, clock_monotonic_us());
}
