// The one source of libisometry-client.so (client/cpp/CMakeLists.txt):
// the library is the client's archives linked whole, its exports limited
// by isometry-client.map. A shared library target needs a source of its
// own; this one adds no symbol.
