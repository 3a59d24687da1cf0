// The two GNU calls the tests' process spawner needs, which Swift's Glibc module hides.
#pragma once
#include <spawn.h>

/// posix_spawn_file_actions_addclosefrom_np: the child closes every descriptor from `low` up.
int cspawn_add_close_from(posix_spawn_file_actions_t *actions, int low);

/// pipe2(fds, O_CLOEXEC): a pipe no concurrently spawned child inherits.
int cspawn_pipe_cloexec(int fds[2]);
