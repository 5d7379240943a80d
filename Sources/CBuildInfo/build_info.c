#include "build_info.h"

// Package.swift defines SCOPEFS_GIT_DESCRIBE for this file only, so a new
// commit recompiles this file and relinks, nothing else.
#ifndef SCOPEFS_GIT_DESCRIBE
#define SCOPEFS_GIT_DESCRIBE ""
#endif

const char *scopefs_git_describe(void) { return SCOPEFS_GIT_DESCRIBE; }
