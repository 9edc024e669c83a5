/* http_fetch.h -- one blocking HTTP/1.1 request to a process's admin
 * listener, for tessera-admin (the response parsed by http_parser).
 *
 * Connects to host:port (an IP address), sends `method path` with
 * Connection: close (and "Authorization: Bearer <token>" when token is not
 * NULL), reads the whole response within timeout_ms. Returns
 * 0 with the status and the body (malloc'd, NUL-terminated; the caller
 * frees it), or -1 with the reason in err.
 */
#ifndef TESSERA_HTTP_FETCH_H
#define TESSERA_HTTP_FETCH_H

#include <stddef.h>

int http_fetch(const char *method, const char *host, int port, const char *path, const char *token, int timeout_ms,
               int *status, char **body, size_t *length, char *err, size_t errlen);

#endif
