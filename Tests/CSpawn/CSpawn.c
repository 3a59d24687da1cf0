// The two GNU calls the tests' process spawner needs, which Swift's Glibc module hides.
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>
#include "CSpawn.h"

int cspawn_add_close_from(posix_spawn_file_actions_t *actions, int low) {
    return posix_spawn_file_actions_addclosefrom_np(actions, low);
}

int cspawn_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }
