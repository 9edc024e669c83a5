/* demo_names.c -- the display names of the demo's players: what other
 * players see of someone (the Avatar's `name`, player_joined), never the
 * account name they log in with, which is half of a credential and would
 * tell an attacker which accounts exist.
 *
 * A display name is an adjective, a noun and a four-digit tag
 * ("QuietHeron#4821"), drawn from the kernel's random source once, when the
 * Avatar is first made; it is stored with the Avatar (a persistent
 * property), so it is the same at every login and after every restore. It
 * is drawn, not derived: nothing computed from the account name (not even
 * a keyed hash, whose key could leak) can be turned back into it. Names are
 * labels, not identities (entity ids are those): 32 x 32 x 10,000 of them,
 * so two players may share one, as two BattleTags share a name. A studio
 * that lets players choose theirs replaces demo_names_pick with its naming
 * screen and a uniqueness claim in its own store. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "demo.h"

static const char *const demo_names_adjectives[] = {
    "Quiet", "Brave",  "Swift", "Amber", "Silver", "Hidden", "Bright", "Gentle", "Iron",  "Misty", "Noble",
    "Rapid", "Silent", "Stout", "Wild",  "Frosty", "Golden", "Lucky",  "Mellow", "Proud", "Rusty", "Shy",
    "Sly",   "Sunny",  "Tidy",  "Vivid", "Wise",   "Witty",  "Zesty",  "Bold",   "Calm",  "Keen",
};

static const char *const demo_names_nouns[] = {
    "Heron", "Otter", "Falcon", "Badger", "Lynx",  "Raven",  "Wren",    "Marten", "Fox",    "Hare",  "Moth",
    "Newt",  "Owl",   "Pike",   "Quail",  "Stoat", "Toad",   "Viper",   "Wolf",   "Yak",    "Bison", "Crane",
    "Dingo", "Egret", "Finch",  "Gecko",  "Ibis",  "Jackal", "Kestrel", "Lemur",  "Magpie", "Robin",
};

#define DEMO_NAMES_COUNT(list) (sizeof(list) / sizeof(list)[0])

/* Four random bytes from the kernel; should it refuse (never on Linux
 * after boot), the clock's nanoseconds, which still have nothing to do
 * with the account. */
static uint32_t demo_names_random(void) {
    uint32_t value = 0;
    if (getrandom(&value, sizeof value, 0) == (ssize_t)sizeof value) return value;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (uint32_t)now.tv_nsec ^ (uint32_t)now.tv_sec;
}

size_t demo_names_pick(char *out, size_t size) {
    uint32_t bits = demo_names_random();
    const char *adjective = demo_names_adjectives[bits % DEMO_NAMES_COUNT(demo_names_adjectives)];
    bits /= DEMO_NAMES_COUNT(demo_names_adjectives);
    const char *noun = demo_names_nouns[bits % DEMO_NAMES_COUNT(demo_names_nouns)];
    bits /= DEMO_NAMES_COUNT(demo_names_nouns);
    int written = snprintf(out, size, "%s%s#%04u", adjective, noun, (unsigned)(bits % 10000u));
    if (written < 0) return 0;
    return (size_t)written < size ? (size_t)written : size - 1;
}
