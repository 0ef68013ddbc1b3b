/*
 * dlopener: a C program that loads a C++ library with dlopen (RTLD_LOCAL)
 * and runs it (cxxplugin.cpp). Exits with plugin_run's result, 2 when the
 * library cannot be loaded.
 *
 * usage: dlopener LIBRARY
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlopener: %s\n", dlerror());
		return 2;
	}
	int (*run)(void) = (int (*)(void))dlsym(h, "plugin_run");
	if (!run)
		return 2;
	return run();
}
