# shardext: PGXS build.  `make`, `make install`; honours PG_CONFIG.
#
# Extension scripts live in src/sql/: shardext--1.0.sql is the released 1.0
# (frozen), and every later version is an upgrade script shardext--A--B.sql.
# CREATE EXTENSION of the newest version runs 1.0 and then the upgrades, so a
# fresh install and an upgraded one are the same.

PG_CONFIG ?= pg_config

EXTENSION = shardext
MODULE_big = shardext

SRCS = $(sort $(wildcard $(srcdir)/src/*.c $(srcdir)/src/*/*.c))
OBJS = $(patsubst $(srcdir)/%.c,%.o,$(SRCS))
SHARDEXT_HEADERS = $(wildcard $(srcdir)/src/include/shardext/*.h)

DATA = $(patsubst $(srcdir)/%,%,$(wildcard $(srcdir)/src/sql/$(EXTENSION)--*.sql))

PG_CPPFLAGS = -I$(srcdir)/src/include -I$(shell $(PG_CONFIG) --includedir)
PG_CFLAGS = -Wall -Werror -Wmissing-prototypes -Wno-declaration-after-statement
# libpq: the server loads the one of shardext.so's run path, which PGXS sets to
# the installation's library directory ($(pg_config --libdir)) unless
# PostgreSQL was configured without rpath (Debian, whose libpq5 is then the
# system's): so the servers of an unpacked PostgreSQL 16-19 archive map their
# own libpq.so.5, not an older one of the system.
SHLIB_LINK = -lpq

# `make SHARDEXT_TEST_BUILD=1` (what scripts/test uses) adds the test-only
# settings (crash injection, pauses, a shifted clock); the normal build has
# none.  .build-flags changes when the flavour or the PostgreSQL installation
# (PG_CONFIG) does, so objects are rebuilt: those of one PostgreSQL version
# are never linked into a library for another.
ifeq ($(SHARDEXT_TEST_BUILD),1)
PG_CPPFLAGS += -DSHARDEXT_TEST_HOOKS
endif
BUILD_FLAGS = .build-flags
BUILD_FLAVOUR := test=$(SHARDEXT_TEST_BUILD) pg=$(shell $(PG_CONFIG) --version) $(shell $(PG_CONFIG) --includedir-server)
$(shell echo '$(BUILD_FLAVOUR)' | cmp -s - $(BUILD_FLAGS) || echo '$(BUILD_FLAVOUR)' > $(BUILD_FLAGS))

# pg_regress suite (sql/ + expected/, in the order of test/schedule).
# `make installcheck` runs it against a running cluster started by
# scripts/cluster: the coordinator on 127.0.0.1:$(SHARDEXT_PORT), its
# workers on the next two ports (the tests read them from WORKER_n_PORT).
# It recreates the test database on the coordinator and drops it on the
# workers first.  The suite moves the snowflake clock and pauses moves, so
# the cluster must run the test build (make SHARDEXT_TEST_BUILD=1 install).  scripts/test runs the same tests (and the others) on a
# cluster of its own.
REGRESS = $(shell sed -n 's/^test: *//p' $(srcdir)/test/schedule)
SHARDEXT_PORT ?= 9700
REGRESS_OPTS = --host=127.0.0.1 --port=$(SHARDEXT_PORT) --user=postgres
REGRESS_PREP = installcheck-prepare
EXTRA_CLEAN = results regression.diffs regression.out $(BUILD_FLAGS) $(CDC_PLUGINS) \
	$(CDC_PLUGINS:$(DLSUFFIX)=.o)

PGXS := $(shell $(PG_CONFIG) --pgxs)

# libpq 17 has the non-blocking cancel API (src/connection/remote_cancel.c)
# but, unlike 18, no LIBPQ_HAS_ASYNC_CANCEL to say so: look for it in the
# libpq-fe.h compiled against (the libpq linked, not the server, decides)
ifneq ($(shell grep -ls PQcancelCreate '$(shell $(PG_CONFIG) --includedir)/libpq-fe.h'),)
PG_CPPFLAGS += -DSHARDEXT_LIBPQ_CANCEL_CREATE
endif
include $(PGXS)

$(OBJS): $(SHARDEXT_HEADERS) $(BUILD_FLAGS)

# Change data capture: the output plugins pgoutput and test_decoding of
# workers, one small library each built from src/plugins/shardext_cdc/
# wrapper.c, installed in $(pkglibdir)/shardext_cdc (which workers put first
# on dynamic_library_path; see cdc_decoder.c).
CDC_PLUGIN_DIR = src/plugins/shardext_cdc
CDC_PLUGINS = $(CDC_PLUGIN_DIR)/pgoutput$(DLSUFFIX) $(CDC_PLUGIN_DIR)/test_decoding$(DLSUFFIX)

all: $(CDC_PLUGINS)

$(CDC_PLUGIN_DIR)/%.o: $(srcdir)/$(CDC_PLUGIN_DIR)/wrapper.c $(BUILD_FLAGS)
	@mkdir -p $(CDC_PLUGIN_DIR)
	$(CC) $(CFLAGS) $(CPPFLAGS) -DSHARDEXT_CDC_PLUGIN='"$*"' -c -o $@ $<

$(CDC_PLUGIN_DIR)/%$(DLSUFFIX): $(CDC_PLUGIN_DIR)/%.o
	$(CC) $(CFLAGS) $< $(LDFLAGS) $(LDFLAGS_SL) -shared -o $@

install: install-cdc-plugins
.PHONY: install-cdc-plugins
install-cdc-plugins: $(CDC_PLUGINS)
	$(MKDIR_P) '$(DESTDIR)$(pkglibdir)/shardext_cdc'
	$(INSTALL_SHLIB) $(CDC_PLUGINS) '$(DESTDIR)$(pkglibdir)/shardext_cdc/'

# what the tests read from the environment; test/bin/diff normalises ports
installcheck: export COORDINATOR_PORT = $(SHARDEXT_PORT)
installcheck: export WORKER_1_PORT = $(shell echo $$(($(SHARDEXT_PORT) + 1)))
installcheck: export WORKER_2_PORT = $(shell echo $$(($(SHARDEXT_PORT) + 2)))
installcheck: export PSQL_BIN = $(bindir)/psql
installcheck: export PATH := $(abspath $(srcdir))/test/bin:$(PATH)

.PHONY: installcheck-prepare test
installcheck-prepare:
	@$(bindir)/psql -X -At -h 127.0.0.1 -p $(SHARDEXT_PORT) -U postgres -d postgres \
		-c "SELECT current_setting('shardext.test_fault', true) IS NOT NULL" | grep -qx t || \
		{ echo "make installcheck needs the test build of shardext on the cluster at port" \
			"$(SHARDEXT_PORT): make SHARDEXT_TEST_BUILD=1 install, then restart the cluster" >&2; \
		  exit 1; }
	@for port in $$WORKER_1_PORT $$WORKER_2_PORT; do \
		$(bindir)/psql -X -q -h 127.0.0.1 -p $$port -U postgres -d postgres \
			-c 'SET client_min_messages = warning' \
			-c 'DROP DATABASE IF EXISTS $(CONTRIB_TESTDB) WITH (FORCE)' || exit 1; \
	done

# everything (scripts/test), without installing packages: scripts/setup does
test:
	SHARDEXT_SKIP_APT=1 $(srcdir)/scripts/test
