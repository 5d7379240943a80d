#ifndef SCOPEFS_BUILD_INFO_H
#define SCOPEFS_BUILD_INFO_H

/// `git describe` of the checkout the binary was built from, as the Makefile
/// passed it (SCOPEFS_GIT_DESCRIBE in the environment of `swift build`), or
/// "" for a plain `swift build`.
const char *scopefs_git_describe(void);

#endif
