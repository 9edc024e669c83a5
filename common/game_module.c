/* game_module.c -- opening a game module and the small services both game
 * hosts give it alike (game_module.h). */
#include "game_module.h"

#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "game_args.h"
#include "log.h"
#include "lua_runtime.h"
#include "method_call.h"

const tessera_game_module *game_module_open(const char *path, const char *program, void **library, char *err,
                                            size_t errlen) {
    *library = NULL;
    dlerror();
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        snprintf(err, errlen, "game_module '%s' does not load: %s", path, why ? why : "unknown error");
        return NULL;
    }
    const tessera_game_module *module = dlsym(handle, TESSERA_GAME_SYMBOL);
    if (!module) {
        snprintf(err, errlen, "game_module '%s' has no '%s' symbol: is it a Tessera game (TESSERA_GAME_EXPORT)?", path,
                 TESSERA_GAME_SYMBOL);
        dlclose(handle);
        return NULL;
    }
    if (module->abi_version != TESSERA_GAME_ABI_VERSION) {
        snprintf(err, errlen,
                 "game_module '%s' (%s) is built for game ABI version %u, and this %s speaks version %u: rebuild it "
                 "against this engine's include/tessera/game.h",
                 path, game_module_name(module), module->abi_version, program, TESSERA_GAME_ABI_VERSION);
        dlclose(handle);
        return NULL;
    }
    *library = handle;
    return module;
}

int game_module_check(const char *definitions_dir, const char *player_class, const char *module_path,
                      const char *program, char *err, size_t errlen) {
    entity_def_registry *definitions = NULL;
    char why[512];
    if (entity_def_load_directory(definitions_dir, &definitions, why, sizeof why) != 0) {
        snprintf(err, errlen, "entity_definitions '%s': %s", definitions_dir, why);
        return -1;
    }
    bool class_missing = player_class && !entity_def_registry_find_class(definitions, player_class);
    entity_def_registry_free(definitions);
    if (class_missing) {
        if (player_class[0])
            snprintf(err, errlen, "player_entity_type '%s' is not defined in %s", player_class, definitions_dir);
        else
            snprintf(err, errlen, "player_entity_type is not set: name the class of %s that a login gets",
                     definitions_dir);
        return -1;
    }
    if (!module_path || !module_path[0]) return 0;
    void *library = NULL;
    if (!game_module_open(module_path, program, &library, err, errlen)) return -1;
    dlclose(library);
    return 0;
}

int game_module_check_scripts(const char *definitions_dir, const char *scripts_folder, const char *side, char *err,
                              size_t errlen) {
    if (!scripts_folder || !scripts_folder[0]) return 0;
    entity_def_registry *definitions = NULL;
    char why[512];
    if (entity_def_load_directory(definitions_dir, &definitions, why, sizeof why) != 0) {
        snprintf(err, errlen, "entity_definitions '%s': %s", definitions_dir, why);
        return -1;
    }
    size_t count = entity_def_registry_class_count(definitions);
    const char **names = xcalloc(count ? count : 1, sizeof *names);
    for (size_t i = 0; i < count; i++) names[i] = entity_def_registry_class(definitions, (uint16_t)i)->name;
    int rc = lua_runtime_check(scripts_folder, side, names, count, why, sizeof why);
    free(names);
    entity_def_registry_free(definitions);
    if (rc != 0) snprintf(err, errlen, "game_scripts '%s': %s", scripts_folder, why);
    return rc;
}

const entity_def_method *game_module_find_method(const entity_def_class *cls, entity_def_part part, const char *name) {
    if (!cls || (unsigned)part >= ENTITY_DEF_PART_COUNT) return NULL;
    const entity_def_method *method = name ? entity_def_class_find_method(cls, part, name) : NULL;
    if (!method)
        log_warn("game: class %s has no %s method '%s'", cls->name, entity_def_part_name(part), name ? name : "");
    return method;
}

tessera_args *game_module_args_create(const entity_def_class *cls, tessera_part part, const char *name) {
    const entity_def_method *method = game_module_find_method(cls, (entity_def_part)part, name);
    return method ? game_args_of(method_call_args_create(method)) : NULL;
}

bool game_module_args_fit(const entity_def_method *method, const tessera_args *args) {
    if (!method->arg_count) return true;
    return args && entity_state_class(game_args_state(args)) == &method->args_class;
}

const char *game_module_name(const tessera_game_module *module) {
    return module && module->name ? module->name : "unnamed";
}

double game_module_setting_number(const config_group *settings, const char *name, double otherwise) {
    const char *text = settings && name ? config_group_find(settings, name) : NULL;
    if (!text) return otherwise;
    char *end;
    double value = strtod(text, &end);
    if (end == text || *end != '\0' || !isfinite(value)) {
        log_warn("game: setting '%s' = '%s' is not a number: %g is used", name, text, otherwise);
        return otherwise;
    }
    return value;
}

void game_module_log(tessera_log_level level, const char *subject, const char *format, va_list args) {
    char text[1024];
    vsnprintf(text, sizeof text, format, args);
    log_level engine_level = level == TESSERA_LOG_DEBUG  ? LOG_LEVEL_DEBUG
                             : level == TESSERA_LOG_INFO ? LOG_LEVEL_INFO
                                                         : LOG_LEVEL_WARN;
    if (subject)
        log_write(engine_level, "game: %s: %s", subject, text);
    else
        log_write(engine_level, "game: %s", text);
}
