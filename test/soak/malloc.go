package soak

// #include <malloc.h>
import "C"

// This file exists for the tests of this package only: it reads and trims glibc's
// allocator, whose freed memory otherwise stays resident in its arenas and hides
// whether native memory was freed at all.

// mallocInUse returns the bytes glibc's malloc has handed out and not had back, over
// every arena and mmapped chunk (mallinfo2's uordblks plus hblkhd).
func mallocInUse() uint64 {
	mi := C.mallinfo2()
	return uint64(mi.uordblks) + uint64(mi.hblkhd)
}

// mallocTrim returns the free memory of every glibc arena to the kernel
// (malloc_trim(0)), so that resident memory counts what is allocated.
func mallocTrim() { C.malloc_trim(0) }
