# shardext: PGXS build.  `make`, `make install`; honours PG_CONFIG.
#
# Extension scripts live in src/sql/: shardext--1.0.sql is the released 1.0
# (frozen), and every later version is an upgrade script shardext--A--B.sql.
# CREATE EXTENSION of the newest version runs 1.0 and then the upgrades, so a
# fresh install and an upgraded one are the same.

EXTENSION = shardext
MODULE_big = shardext

SRCS = $(sort $(wildcard $(srcdir)/src/*.c $(srcdir)/src/*/*.c))
OBJS = $(patsubst $(srcdir)/%.c,%.o,$(SRCS))
SHARDEXT_HEADERS = $(wildcard $(srcdir)/src/include/shardext/*.h)

DATA = $(wildcard $(srcdir)/src/sql/$(EXTENSION)--*.sql)

PG_CPPFLAGS = -I$(srcdir)/src/include -I$(shell $(PG_CONFIG) --includedir)
PG_CFLAGS = -Wall -Werror -Wmissing-prototypes -Wno-declaration-after-statement
SHLIB_LINK = -lpq

# `make SHARDEXT_TEST_BUILD=1` (what scripts/test uses) adds the test-only
# settings (crash injection, pauses, a shifted clock); the normal build has
# none.  .build-flags changes when the flavour does, so objects are rebuilt.
ifeq ($(SHARDEXT_TEST_BUILD),1)
PG_CPPFLAGS += -DSHARDEXT_TEST_HOOKS
endif
BUILD_FLAGS = .build-flags
$(shell echo 'test=$(SHARDEXT_TEST_BUILD)' | cmp -s - $(BUILD_FLAGS) || echo 'test=$(SHARDEXT_TEST_BUILD)' > $(BUILD_FLAGS))

# pg_regress suite (sql/ + expected/) is driven by scripts/test, which
# starts the multi-node cluster it needs; see README.md.
EXTRA_CLEAN = results regression.diffs regression.out $(BUILD_FLAGS)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

$(OBJS): $(SHARDEXT_HEADERS) $(BUILD_FLAGS)

.PHONY: test
test:
	$(srcdir)/scripts/test
