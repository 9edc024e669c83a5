/* admin_guard.c -- the admin listener's token, Host and Origin checks
 * (admin_guard.h). It owns the hashed token and the parsing of Host values
 * and the allowed lists; it knows nothing of connections or routes. */
#include "admin_guard.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A Host name (or list entry) longer than this is refused, not truncated. */
#define ADMIN_GUARD_NAME_MAX 256

int admin_guard_init(admin_guard *guard, const char *token, const char *listen_host, int port,
                     const char *allowed_hosts, const char *allowed_origins, char *err, size_t errlen) {
    memset(guard, 0, sizeof *guard);
    if (sodium_init() < 0) {
        snprintf(err, errlen, "libsodium failed to initialise");
        return -1;
    }
    if (token && token[0]) {
        guard->has_token = true;
        crypto_generichash(guard->token_hash, sizeof guard->token_hash, (const unsigned char *)token, strlen(token),
                           NULL, 0);
    }
    guard->port = port;
    struct {
        const char *name, *value;
        char *out;
        size_t size;
    } copies[] = {
        {"admin_host", listen_host, guard->listen_host, sizeof guard->listen_host},
        {"admin_allowed_hosts", allowed_hosts, guard->allowed_hosts, sizeof guard->allowed_hosts},
        {"admin_allowed_origins", allowed_origins, guard->allowed_origins, sizeof guard->allowed_origins},
    };
    for (size_t i = 0; i < sizeof copies / sizeof copies[0]; i++) {
        const char *value = copies[i].value ? copies[i].value : "";
        if ((size_t)snprintf(copies[i].out, copies[i].size, "%s", value) >= copies[i].size) {
            snprintf(err, errlen, "%s is longer than %zu bytes", copies[i].name, copies[i].size - 1);
            return -1;
        }
    }
    return 0;
}

/* Trims whitespace from both ends of [*start, end): moves *start past the
 * leading run and returns the length left. */
static size_t admin_guard_trim(const char **start, const char *end) {
    while (*start < end && isspace((unsigned char)**start)) (*start)++;
    while (end > *start && isspace((unsigned char)end[-1])) end--;
    return (size_t)(end - *start);
}

/* ---- the token ---------------------------------------------------------------- */

int admin_guard_read_token_file(const char *path, char *out, size_t size, char *err, size_t errlen) {
    return secret_file_read("admin_token_file", path, ADMIN_GUARD_TOKEN_MIN, out, size, err, errlen);
}

static bool admin_guard_matches(const admin_guard *guard, const char *presented) {
    unsigned char hash[crypto_generichash_BYTES];
    crypto_generichash(hash, sizeof hash, (const unsigned char *)presented, strlen(presented), NULL, 0);
    return sodium_memcmp(hash, guard->token_hash, sizeof hash) == 0;
}

bool admin_guard_token_ok(const admin_guard *guard, const char *authorization, const char *query_token) {
    if (!guard->has_token) return false;
    if (authorization && strncasecmp(authorization, "Bearer ", 7) == 0) {
        const char *token = authorization + 7;
        while (*token == ' ') token++;
        if (admin_guard_matches(guard, token)) return true;
    }
    return query_token && query_token[0] && admin_guard_matches(guard, query_token);
}

/* ---- Host and Origin ------------------------------------------------------------ */

/* Splits "name[:port]" or "[v6][:port]" into name and port (-1: none).
 * False when it does not parse or the name does not fit. */
static bool admin_guard_split_host(const char *text, char *name, size_t size, long *port) {
    const char *name_start = text, *name_end, *rest;
    if (text[0] == '[') {
        name_start = text + 1;
        name_end = strchr(name_start, ']');
        if (!name_end) return false;
        rest = name_end + 1;
    } else {
        const char *colon = strchr(text, ':');
        if (colon && strchr(colon + 1, ':')) colon = NULL; /* a bare IPv6 address: no port */
        name_end = colon ? colon : text + strlen(text);
        rest = name_end;
    }
    size_t length = (size_t)(name_end - name_start);
    if (length == 0 || length >= size) return false;
    memcpy(name, name_start, length);
    name[length] = '\0';
    *port = -1;
    if (*rest == '\0') return true;
    if (*rest != ':' || !rest[1]) return false;
    long value = 0;
    for (const char *c = rest + 1; *c; c++) {
        if (!isdigit((unsigned char)*c) || value > 65535) return false;
        value = value * 10 + (*c - '0');
    }
    if (value < 1 || value > 65535) return false;
    *port = value;
    return true;
}

/* The next comma-separated entry of a list, trimmed, into out; false at
 * the end. An entry that does not fit is skipped. */
static bool admin_guard_next_entry(const char **cursor, char *out, size_t size) {
    while (**cursor) {
        const char *start = *cursor;
        const char *end = strchr(start, ',');
        if (!end) end = start + strlen(start);
        *cursor = *end ? end + 1 : end;
        size_t length = admin_guard_trim(&start, end);
        if (length == 0 || length >= size) continue;
        memcpy(out, start, length);
        out[length] = '\0';
        return true;
    }
    return false;
}

bool admin_guard_host_ok(const admin_guard *guard, const char *host, const char *local_ip) {
    if (!host || !host[0]) return false;
    char name[ADMIN_GUARD_NAME_MAX];
    long port;
    if (!admin_guard_split_host(host, name, sizeof name, &port)) return false;
    /* No port in Host means port 80. */
    long effective = port < 0 ? 80 : port;
    bool ours = strcasecmp(name, guard->listen_host) == 0 || (local_ip && strcasecmp(name, local_ip) == 0);
    if (ours && effective == guard->port) return true;
    const char *cursor = guard->allowed_hosts;
    char entry[ADMIN_GUARD_NAME_MAX], entry_name[ADMIN_GUARD_NAME_MAX];
    while (admin_guard_next_entry(&cursor, entry, sizeof entry)) {
        long entry_port;
        if (!admin_guard_split_host(entry, entry_name, sizeof entry_name, &entry_port)) continue;
        if (strcasecmp(entry_name, name) == 0 && (entry_port < 0 || entry_port == effective)) return true;
    }
    return false;
}

/* Whether `origin` ("http://A.B.C.D:PORT") lies in a network entry
 * ("http://A.B.C.D/N:PORT" or "http://A.B.C.D/N:*"): the pages of every
 * process of a pod network, whose addresses are not known in advance.
 * IPv4 only; false for anything that does not parse. */
static bool admin_guard_origin_in_network(const char *origin, const char *entry) {
    if (strncasecmp(origin, "http://", 7) != 0 || strncasecmp(entry, "http://", 7) != 0) return false;
    const char *slash = strchr(entry + 7, '/');
    const char *entry_colon = slash ? strchr(slash, ':') : NULL;
    const char *origin_colon = strchr(origin + 7, ':');
    if (!slash || !entry_colon || !origin_colon) return false;
    char network_text[INET_ADDRSTRLEN], address_text[INET_ADDRSTRLEN];
    size_t network_length = (size_t)(slash - (entry + 7)), address_length = (size_t)(origin_colon - (origin + 7));
    if (network_length >= sizeof network_text || address_length >= sizeof address_text) return false;
    memcpy(network_text, entry + 7, network_length);
    network_text[network_length] = '\0';
    memcpy(address_text, origin + 7, address_length);
    address_text[address_length] = '\0';
    struct in_addr network, address;
    if (inet_pton(AF_INET, network_text, &network) != 1 || inet_pton(AF_INET, address_text, &address) != 1)
        return false;
    size_t prefix_digits = (size_t)(entry_colon - (slash + 1));
    if (prefix_digits < 1 || prefix_digits > 2 || strspn(slash + 1, "0123456789") != prefix_digits) return false;
    int prefix = (slash[1] - '0') * (prefix_digits == 2 ? 10 : 1) + (prefix_digits == 2 ? slash[2] - '0' : 0);
    if (prefix > 32) return false;
    uint32_t mask = prefix == 0 ? 0 : 0xffffffffu << (32 - prefix);
    if ((ntohl(network.s_addr) & mask) != (ntohl(address.s_addr) & mask)) return false;
    const char *port = origin_colon + 1;
    size_t count = strspn(port, "0123456789");
    if (count < 1 || count > 5 || port[count] != '\0') return false;
    return strcmp(entry_colon + 1, "*") == 0 || strcmp(entry_colon + 1, port) == 0;
}

bool admin_guard_origin_ok(const admin_guard *guard, const char *origin, const char *local_ip) {
    if (!origin) return true;
    if (strcasecmp(origin, "null") == 0) return false;
    if (strncasecmp(origin, "http://", 7) == 0 && !strchr(origin + 7, '/') &&
        admin_guard_host_ok(guard, origin + 7, local_ip))
        return true;
    const char *cursor = guard->allowed_origins;
    char entry[ADMIN_GUARD_NAME_MAX];
    while (admin_guard_next_entry(&cursor, entry, sizeof entry)) {
        size_t length = strlen(entry);
        const char *scheme_end = strstr(entry, "://");
        if (scheme_end && strchr(scheme_end + 3, '/')) {
            if (admin_guard_origin_in_network(origin, entry)) return true;
        } else if (length > 2 && strcmp(entry + length - 2, ":*") == 0) {
            /* Any port: the entry up to and with its colon, then 1..5 digits. */
            if (strncasecmp(origin, entry, length - 1) != 0) continue;
            const char *digits = origin + length - 1;
            size_t count = strspn(digits, "0123456789");
            if (count >= 1 && count <= 5 && digits[count] == '\0') return true;
        } else if (strcasecmp(origin, entry) == 0) {
            return true;
        }
    }
    return false;
}
