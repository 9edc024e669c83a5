/* tls.c -- OpenSSL contexts and per-connection sessions over memory BIOs
 * (tls.h). It owns the SSL_CTX of each side and, per connection, the SSL
 * object with its two BIOs: `network_in` holds what arrived from the
 * peer, `network_out` what OpenSSL wants sent. */
#include "tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct tls_context {
    SSL_CTX *ctx;
};

struct tls_session {
    SSL *ssl;
    BIO *network_in;  /* the peer's bytes, read by OpenSSL */
    BIO *network_out; /* OpenSSL's bytes, for the peer */
    bool established;
    char error[192];
};

/* The most recent OpenSSL error as text, with `what` in front. */
static void tls_describe_error(char *out, size_t size, const char *what) {
    unsigned long code = ERR_get_error();
    char detail[160] = "";
    if (code) ERR_error_string_n(code, detail, sizeof detail);
    ERR_clear_error();
    snprintf(out, size, "%s%s%s", what, detail[0] ? ": " : "", detail);
}

static tls_context *tls_context_new(const SSL_METHOD *method, char *err, size_t errlen) {
    SSL_CTX *ctx = SSL_CTX_new(method);
    if (!ctx) {
        tls_describe_error(err, errlen, "cannot create a TLS context");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    /* No resumption: a client logs in once per connection and a
     * reconnect is a new session anyway; a session cache and tickets would
     * only hold memory per client. */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(ctx, 0);
    /* Our buffers may move between a write that wants more and its retry,
     * and a write is always taken whole by the memory BIO. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
    tls_context *context = xcalloc(1, sizeof *context);
    context->ctx = ctx;
    return context;
}

tls_context *tls_server_context_create(const char *certificate_file, const char *key_file, char *err, size_t errlen) {
    tls_context *context = tls_context_new(TLS_server_method(), err, errlen);
    if (!context) return NULL;
    char what[320];
    if (SSL_CTX_use_certificate_chain_file(context->ctx, certificate_file) != 1) {
        snprintf(what, sizeof what, "cannot load the TLS certificate chain '%s'", certificate_file);
        tls_describe_error(err, errlen, what);
    } else if (SSL_CTX_use_PrivateKey_file(context->ctx, key_file, SSL_FILETYPE_PEM) != 1) {
        if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH)
            snprintf(what, sizeof what, "the TLS private key '%s' does not match the certificate '%s'", key_file,
                     certificate_file);
        else
            snprintf(what, sizeof what, "cannot load the TLS private key '%s'", key_file);
        tls_describe_error(err, errlen, what);
    } else if (SSL_CTX_check_private_key(context->ctx) != 1) {
        snprintf(what, sizeof what, "the TLS private key '%s' does not match the certificate '%s'", key_file,
                 certificate_file);
        tls_describe_error(err, errlen, what);
    } else {
        return context;
    }
    tls_context_free(context);
    return NULL;
}

tls_context *tls_client_context_create(const char *ca_file, char *err, size_t errlen) {
    tls_context *context = tls_context_new(TLS_client_method(), err, errlen);
    if (!context) return NULL;
    int loaded = ca_file && ca_file[0] ? SSL_CTX_load_verify_locations(context->ctx, ca_file, NULL)
                                       : SSL_CTX_set_default_verify_paths(context->ctx);
    if (loaded != 1) {
        char what[320];
        snprintf(what, sizeof what, "cannot load the trusted certificates '%s'",
                 ca_file && ca_file[0] ? ca_file : "(the system's)");
        tls_describe_error(err, errlen, what);
        tls_context_free(context);
        return NULL;
    }
    SSL_CTX_set_verify(context->ctx, SSL_VERIFY_PEER, NULL);
    return context;
}

void tls_context_free(tls_context *context) {
    if (!context) return;
    SSL_CTX_free(context->ctx);
    free(context);
}

tls_session *tls_session_create(tls_context *context, bool server, const char *server_name) {
    tls_session *session = xcalloc(1, sizeof *session);
    session->ssl = SSL_new(context->ctx);
    session->network_in = BIO_new(BIO_s_mem());
    session->network_out = BIO_new(BIO_s_mem());
    if (!session->ssl || !session->network_in || !session->network_out) {
        log_error("cannot create a TLS session (out of memory?)");
        SSL_free(session->ssl);
        BIO_free(session->network_in);
        BIO_free(session->network_out);
        free(session);
        return NULL;
    }
    /* An empty memory BIO reads as "retry later", not as end of file. */
    BIO_set_mem_eof_return(session->network_in, -1);
    SSL_set_bio(session->ssl, session->network_in, session->network_out); /* the SSL owns both now */
    if (server) {
        SSL_set_accept_state(session->ssl);
    } else {
        SSL_set_connect_state(session->ssl);
        if (server_name && server_name[0]) {
            SSL_set_tlsext_host_name(session->ssl, server_name);
            SSL_set1_host(session->ssl, server_name);
        }
    }
    return session;
}

void tls_session_free(tls_session *session) {
    if (!session) return;
    SSL_free(session->ssl);
    free(session);
}

/* The outcome of an SSL call that returned `rc`: TLS_WANT_MORE when it
 * only waits for the peer, else TLS_FAILED with the cause kept. */
static int tls_session_outcome(tls_session *session, int rc, const char *what) {
    int code = SSL_get_error(session->ssl, rc);
    if (code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE) return TLS_WANT_MORE;
    if (code == SSL_ERROR_ZERO_RETURN) {
        snprintf(session->error, sizeof session->error, "the peer closed the TLS session");
        return TLS_FAILED;
    }
    long verified = SSL_get_verify_result(session->ssl);
    if (verified != X509_V_OK) {
        snprintf(session->error, sizeof session->error, "%s: the certificate did not verify: %s", what,
                 X509_verify_cert_error_string(verified));
        ERR_clear_error();
        return TLS_FAILED;
    }
    tls_describe_error(session->error, sizeof session->error, what);
    return TLS_FAILED;
}

int tls_session_feed(tls_session *session, const uint8_t *data, size_t length) {
    if (length == 0) return 0;
    if (length > INT32_MAX || BIO_write(session->network_in, data, (int)length) != (int)length) {
        snprintf(session->error, sizeof session->error, "cannot buffer %zu received bytes", length);
        return TLS_FAILED;
    }
    return 0;
}

int tls_session_handshake(tls_session *session) {
    if (session->established) return 1;
    int rc = SSL_do_handshake(session->ssl);
    if (rc == 1) {
        session->established = true;
        return 1;
    }
    return tls_session_outcome(session, rc, "TLS handshake failed");
}

bool tls_session_established(const tls_session *session) { return session->established; }

int tls_session_read(tls_session *session, uint8_t *out, size_t capacity) {
    if (capacity == 0) return TLS_WANT_MORE;
    int rc = SSL_read(session->ssl, out, capacity > INT32_MAX ? INT32_MAX : (int)capacity);
    if (rc > 0) return rc;
    return tls_session_outcome(session, rc, "TLS read failed");
}

int tls_session_write(tls_session *session, const uint8_t *data, size_t length) {
    while (length > 0) {
        int chunk = length > INT32_MAX ? INT32_MAX : (int)length;
        int rc = SSL_write(session->ssl, data, chunk);
        if (rc <= 0) {
            tls_session_outcome(session, rc, "TLS write failed");
            if (!session->error[0]) snprintf(session->error, sizeof session->error, "TLS write did not complete");
            return TLS_FAILED;
        }
        data += rc;
        length -= (size_t)rc;
    }
    return 0;
}

size_t tls_session_output_pending(const tls_session *session) { return BIO_ctrl_pending(session->network_out); }

size_t tls_session_take_output(tls_session *session, uint8_t *out, size_t capacity) {
    if (capacity == 0) return 0;
    int rc = BIO_read(session->network_out, out, capacity > INT32_MAX ? INT32_MAX : (int)capacity);
    return rc > 0 ? (size_t)rc : 0;
}

const char *tls_session_error(const tls_session *session) { return session->error; }
