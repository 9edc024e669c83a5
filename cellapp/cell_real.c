/* cell_real.c -- releases what a real's part holds above its cell (its
 * witness and its controllers) when the cell says the part goes, and
 * makes witnesses forget an entity the cell frees. It owns nothing. */
#include "cell_real.h"

#include "controller.h"
#include "witness.h"

static void cell_real_release(void *host, cell *c, cell_entity *entity) {
    (void)host;
    if (entity->real->witness) witness_detach(c, entity);
    controller_release(entity);
}

static void cell_real_entity_freed(void *host, cell_entity *entity) {
    (void)host;
    witness_entity_gone(entity);
}

void cell_real_install_hooks(cell_shared *shared) {
    shared->release_real = cell_real_release;
    shared->entity_freed = cell_real_entity_freed;
}
