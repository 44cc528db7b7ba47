// cmake/layer_check.cpp — the empty program each layer's objects are linked into, with those of
// the layers below it only (CMakeLists.txt, kiln_add_layer): linking fails when a layer calls
// something defined in a layer above it. See Note [Layering] in core/tensor.h.
int main() { return 0; }
