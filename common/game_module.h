/* game_module.h -- what both game hosts (cellapp/game_host.c,
 * baseapp/base_game.c) do alike with a game module: open it and check its
 * ABI, read the game's own settings, and write its log lines. */
#ifndef TESSERA_GAME_MODULE_H
#define TESSERA_GAME_MODULE_H

#include <stdarg.h>
#include <stddef.h>

#include <tessera/game.h>

#include "config.h"
#include "entity_def.h"

/* dlopens `path` and finds its tessera_game, built for this engine's ABI.
 * Returns it with the handle in *library (dlclose it when done), or NULL
 * with why in err, naming `program` ("cellapp", "baseapp"): the file does
 * not load, has no tessera_game symbol, or is built for another version. */
const tessera_game_module *game_module_open(const char *path, const char *program, void **library, char *err,
                                            size_t errlen);

/* What --check does with a game before anything starts: loads the entity
 * definitions in `definitions_dir` (and, when `player_class` is not NULL,
 * finds that class in them), and opens the module at `module_path` (none:
 * "") to check its ABI, then lets both go. Returns 0, or -1 with the first
 * problem in err, naming the setting: a definition that does not load (the
 * file and what is wrong), a player class they lack, a module that does
 * not load, is no game, or is built for another ABI version. */
int game_module_check(const char *definitions_dir, const char *player_class, const char *module_path,
                      const char *program, char *err, size_t errlen);

/* What --check does with a game's Lua scripts (lua_runtime.h): loads every
 * script of `scripts_folder` (none: "") for the classes of the definitions
 * in `definitions_dir`, as `side` ("cell", "base") would, without running a
 * hook. Returns 0, or -1 with the first problem in err (file:line). */
int game_module_check_scripts(const char *definitions_dir, const char *scripts_folder, const char *side, char *err,
                              size_t errlen);

/* Method `name` of `part` of `cls`, or NULL, logged as the game's mistake
 * ("class X has no cell method 'y'"). */
const entity_def_method *game_module_find_method(const entity_def_class *cls, entity_def_part part, const char *name);
/* Arguments for it (tessera_args), NULL when there is no such method. */
tessera_args *game_module_args_create(const entity_def_class *cls, tessera_part part, const char *name);
/* Whether `args` were made for `method` (or it takes none). */
bool game_module_args_fit(const entity_def_method *method, const tessera_args *args);

/* The module's name, or "unnamed". */
const char *game_module_name(const tessera_game_module *module);

/* Setting `name` of the config's "game" group as a number, or `otherwise`
 * when it is missing (or, logged, not a number). */
double game_module_setting_number(const config_group *settings, const char *name, double otherwise);

/* One log line of game code: "game: <subject>: <message>" (subject NULL:
 * "game: <message>"). */
void game_module_log(tessera_log_level level, const char *subject, const char *format, va_list args);

#endif
