/* tls.h -- TLS 1.3 for a connection on the libuv loop, by OpenSSL over
 * memory BIOs.
 *
 * OpenSSL never touches the socket: the connection (channel.c) feeds it
 * the bytes that arrived (tls_session_feed), reads the plaintext they carry
 * (tls_session_read), gives it plaintext to send (tls_session_write), and
 * sends whatever ciphertext OpenSSL produced meanwhile (handshake records
 * included: tls_session_take_output) -- so the loop never blocks and the
 * connection's own buffering, backpressure and limits hold as they are.
 *
 * A context holds what every connection of one side shares: a server's
 * certificate chain and key, or a client's trusted certificates and
 * whether the server must prove its name. Only TLS 1.3 is spoken.
 *
 * Errors come back as codes; tls_session_error names the cause (the
 * certificate did not verify, the peer spoke something else than TLS).
 */
#ifndef TESSERA_TLS_H
#define TESSERA_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tls_context tls_context;
typedef struct tls_session tls_session;

/* A server's context from a PEM certificate chain and its private key.
 * NULL with the cause in err. */
tls_context *tls_server_context_create(const char *certificate_file, const char *key_file, char *err, size_t errlen);
/* A client's context: the server's certificate must chain to one in
 * `ca_file` (PEM), or to the system's trusted ones when it is NULL or "".
 * NULL with the cause in err. */
tls_context *tls_client_context_create(const char *ca_file, char *err, size_t errlen);
void tls_context_free(tls_context *context);

/* A connection's session: a server's for an accepted connection, a
 * client's (which must see `server_name` in the server's certificate, and
 * sends it as SNI) for a dialled one. */
tls_session *tls_session_create(tls_context *context, bool server, const char *server_name);
void tls_session_free(tls_session *session);

/* What the calls below return besides byte counts. */
#define TLS_WANT_MORE 0 /* nothing to do until more bytes arrive */
#define TLS_FAILED (-1) /* the session is broken: tls_session_error says why; close */

/* Bytes that arrived from the peer. Returns 0, or TLS_FAILED. */
int tls_session_feed(tls_session *session, const uint8_t *data, size_t length);
/* Moves the handshake on: 1 once it is complete, TLS_WANT_MORE, or
 * TLS_FAILED. Its records are in the output. */
int tls_session_handshake(tls_session *session);
bool tls_session_established(const tls_session *session);
/* Plaintext the peer sent: up to `capacity` bytes into `out`; the count,
 * TLS_WANT_MORE, or TLS_FAILED. */
int tls_session_read(tls_session *session, uint8_t *out, size_t capacity);
/* Encrypts `length` bytes of plaintext (the handshake must be complete)
 * into the output. Returns 0, or TLS_FAILED. */
int tls_session_write(tls_session *session, const uint8_t *data, size_t length);
/* Ciphertext waiting to go to the peer. */
size_t tls_session_output_pending(const tls_session *session);
/* Takes up to `capacity` bytes of it into `out`; returns how many. */
size_t tls_session_take_output(tls_session *session, uint8_t *out, size_t capacity);
/* Why the session failed ("" while it has not). */
const char *tls_session_error(const tls_session *session);

#endif
