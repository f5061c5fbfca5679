// A stand-in for a program of the GPU kit in the dry run of dev/gpu_checks.sh (tests/gpu_lease.sh):
// an ELF binary, as the kit's library check wants, that runs tests/gpu_stub.sh with the name
// it was installed under and its arguments. STUB_SCRIPT: the script's path, set at compile time.
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
    char* args[64];
    const char* name = strrchr(argv[0], '/');
    int n = 0;
    args[n++] = "bash";
    args[n++] = STUB_SCRIPT;
    args[n++] = (char*)(name != NULL ? name + 1 : argv[0]);
    for (int i = 1; i < argc && n < 63; i++) { args[n++] = argv[i]; }
    args[n] = NULL;
    execv("/bin/bash", args);
    perror("gpu_stub: /bin/bash");
    return 1;
}
