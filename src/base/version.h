/* version.h — the one version string: --version, the JSON's attnviz_version
 * and the installed man page (the Makefile reads it from here). */
#ifndef ATTNVIZ_VERSION_H
#define ATTNVIZ_VERSION_H

#define ATTNVIZ_VERSION "0.1.0"

#endif
