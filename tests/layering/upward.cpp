// One file for every layering check (tests/layering/CMakeLists.txt): it includes the header
// KVTK_LAYER_HEADER names, and is compiled with the include paths of one sim/ library. A header
// of a room below that library compiles (the control); one of a room above must not be found.
#include KVTK_LAYER_HEADER

int kvtk_layering_check() { return 0; }
