/* LD_PRELOAD shim for the crash tests: kills the process with SIGKILL at an exact moment of
 * its file-system work, so a test can crash headlab in the middle of a checkpoint write
 * deterministically instead of hoping a timer lands there.
 *
 *   HEADLAB_KILL_AT=fsync:7          SIGKILL at the 7th fsync(), before it runs
 *   HEADLAB_KILL_AT=rename:3:after   SIGKILL right after the 3rd rename() succeeded
 *   HEADLAB_KILL_AT=write:40         SIGKILL at the 40th write() to a descriptor > 2
 *   HEADLAB_KILL_AT=rename:3:fail    the 3rd rename() fails with EIO instead (a failing disk)
 *   HEADLAB_KILL_COUNTS=<file>       at exit, append "fsync N rename N write N" to <file>
 *
 * Calls are counted from the start of the process. Only for tests; never linked into headlab. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { kFsync, kRename, kWrite, kKinds };
static const char* const kNames[kKinds] = {"fsync", "rename", "write"};
static long counts[kKinds];
static int target_kind = -1;
static long target_call = 0;
static int after = 0;
static int fail_instead = 0;

__attribute__((constructor)) static void shim_init(void) {
  const char* spec = getenv("HEADLAB_KILL_AT");
  if (!spec) return;
  for (int k = 0; k < kKinds; ++k) {
    const size_t n = strlen(kNames[k]);
    if (strncmp(spec, kNames[k], n) == 0 && spec[n] == ':') {
      target_kind = k;
      char* end = NULL;
      target_call = strtol(spec + n + 1, &end, 10);
      after = end && strcmp(end, ":after") == 0;
      fail_instead = end && strcmp(end, ":fail") == 0;
    }
  }
}

__attribute__((destructor)) static void shim_fini(void) {
  const char* path = getenv("HEADLAB_KILL_COUNTS");
  if (!path) return;
  FILE* f = fopen(path, "a");
  if (!f) return;
  fprintf(f, "fsync %ld rename %ld write %ld\n", counts[kFsync], counts[kRename], counts[kWrite]);
  fclose(f);
}

/* Counts a call; true when this is the one to die at. */
static int due(int kind) {
  return ++counts[kind] == target_call && target_kind == kind;
}

static void die(void) {
  raise(SIGKILL);
  _exit(137); /* not reached */
}

int fsync(int fd) {
  static int (*real)(int) = NULL;
  if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  const int kill_now = due(kFsync);
  if (kill_now && fail_instead) return errno = EIO, -1;
  if (kill_now && !after) die();
  const int r = real(fd);
  if (kill_now) die();
  return r;
}

int rename(const char* from, const char* to) {
  static int (*real)(const char*, const char*) = NULL;
  if (!real) real = (int (*)(const char*, const char*))dlsym(RTLD_NEXT, "rename");
  const int kill_now = due(kRename);
  if (kill_now && fail_instead) return errno = EIO, -1;
  if (kill_now && !after) die();
  const int r = real(from, to);
  if (kill_now) die();
  return r;
}

ssize_t write(int fd, const void* buf, size_t n) {
  static ssize_t (*real)(int, const void*, size_t) = NULL;
  if (!real) real = (ssize_t (*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  if (fd > 2) {
    const int kill_now = due(kWrite);
    if (kill_now && fail_instead) return errno = EIO, -1;
    if (kill_now && !after) {
      /* Half of the buffer first: the file is left torn in the middle of a write. */
      real(fd, buf, n / 2);
      die();
    }
    const ssize_t r = real(fd, buf, n);
    if (kill_now) die();
    return r;
  }
  return real(fd, buf, n);
}
