/* play_files.h -- the files a baseapp's WebSocket port serves to a plain
 * GET (websocket.h, websocket_serve): the play page (web/play.html) at
 * /play and the TypeScript SDK built into one script (client/js, esbuild's
 * IIFE bundle) at /tessera.js, both compiled in by meson, so a browser
 * needs nothing but the port's address. */
#ifndef TESSERA_PLAY_FILES_H
#define TESSERA_PLAY_FILES_H

#include <stddef.h>

#include "websocket.h"

/* How many files there are. */
#define PLAY_FILES_COUNT 2

/* Fills out[0..PLAY_FILES_COUNT) with them (the bytes are the program's;
 * the table is the caller's, to keep as long as it serves). */
void play_files_fill(websocket_resource out[PLAY_FILES_COUNT]);

#endif
