# shardext: PGXS build.  `make`, `make install`; honours PG_CONFIG.
#
# The extension's install script is assembled from the numbered fragments in
# src/sql/install/ so that each feature keeps its SQL next to its peers.
# Upgrade scripts (shardext--A--B.sql) live in src/sql/ as they are.

EXTENSION = shardext
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(srcdir)/shardext.control)
MODULE_big = shardext

SRCS = $(sort $(wildcard $(srcdir)/src/*.c $(srcdir)/src/*/*.c))
OBJS = $(patsubst $(srcdir)/%.c,%.o,$(SRCS))
SHARDEXT_HEADERS = $(wildcard $(srcdir)/src/include/shardext/*.h)

INSTALL_SQL = src/sql/$(EXTENSION)--$(EXTVERSION).sql
SQL_FRAGMENTS = $(sort $(wildcard $(srcdir)/src/sql/install/*.sql))
DATA_built = $(INSTALL_SQL)
DATA = $(wildcard $(srcdir)/src/sql/$(EXTENSION)--*--*.sql)

PG_CPPFLAGS = -I$(srcdir)/src/include -I$(shell $(PG_CONFIG) --includedir)
PG_CFLAGS = -Wall -Werror -Wmissing-prototypes -Wno-declaration-after-statement
SHLIB_LINK = -lpq

# pg_regress suite (sql/ + expected/) is driven by scripts/test, which
# starts the multi-node cluster it needs; see README.md.
EXTRA_CLEAN = results regression.diffs regression.out

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

$(OBJS): $(SHARDEXT_HEADERS)

$(INSTALL_SQL): $(SQL_FRAGMENTS) $(srcdir)/shardext.control
	@mkdir -p $(dir $@)
	( echo '-- generated from src/sql/install/*.sql; do not edit'; \
	  printf '%s\n' '\echo Use "CREATE EXTENSION $(EXTENSION)" to load this file. \quit'; \
	  for f in $(SQL_FRAGMENTS); do echo; echo "-- $$(basename $$f)"; cat $$f; done ) > $@

.PHONY: test
test:
	$(srcdir)/scripts/test
