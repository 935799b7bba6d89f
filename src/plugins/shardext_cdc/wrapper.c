/*-------------------------------------------------------------------------
 *
 * wrapper.c
 *	  The output plugins "pgoutput" and "test_decoding" of shardext's
 *	  workers: PostgreSQL's own plugins, through which shards decode as
 *	  their distributed tables.
 *
 * This file is built twice, as pgoutput and as test_decoding
 * (SHARDEXT_CDC_PLUGIN names which), and installed in $libdir/shardext_cdc;
 * workers put that directory first on dynamic_library_path, so consumers
 * that ask for those plugins get these.  Each only hands over to shardext
 * (cdc_decoder.c), which loads the real plugin from $libdir and wraps it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "replication/output_plugin.h"

#ifndef SHARDEXT_CDC_PLUGIN
#error "SHARDEXT_CDC_PLUGIN must name the wrapped plugin"
#endif

PG_MODULE_MAGIC;

typedef void (*CdcPluginInit) (OutputPluginCallbacks *cb, const char *plugin);

extern PGDLLEXPORT void _PG_output_plugin_init(OutputPluginCallbacks *cb);

/*
 * _PG_output_plugin_init hands over to shardext; a shardext library without
 * change data capture (an older one, during an upgrade) gets the real
 * plugin as it is.
 */
void
_PG_output_plugin_init(OutputPluginCallbacks *cb)
{
	CdcPluginInit init;
	LogicalOutputPluginInit realInit;

	init = (CdcPluginInit) load_external_function("$libdir/shardext",
												  "shardext_cdc_plugin_init", false, NULL);
	if (init != NULL)
	{
		init(cb, SHARDEXT_CDC_PLUGIN);
		return;
	}
	/*
	 * By its full path: from PostgreSQL 18 on, "$libdir/<name>" is looked up
	 * along dynamic_library_path, which finds this wrapper first.
	 */
	realInit = (LogicalOutputPluginInit)
		load_external_function(psprintf("%s/%s", pkglib_path, SHARDEXT_CDC_PLUGIN),
							   "_PG_output_plugin_init", true, NULL);
	realInit(cb);
}
