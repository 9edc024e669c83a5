/* no_symbol.c -- a shared object that is not a game module: it exports no
 * tessera_game (test_game_module.py). */
int no_symbol_answer(void);
int no_symbol_answer(void) { return 42; }
