/* libtrace_target.so: a library function probed by the trace tests, called
 * from the executable through its PLT and from inside the library. */
__attribute__((noinline)) int lib_work(int x)
{
	return x * 3 + 1;
}

/* Calls lib_work through this library's own PLT (-fPIC, default
 * semantic interposition). */
__attribute__((noinline)) int lib_outer(int x)
{
	return lib_work(x) + lib_work(x + 1);
}
