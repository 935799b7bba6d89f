-- shardext 1.1 -> 1.2.
--
-- A fresh CREATE EXTENSION of 1.2 runs shardext--1.0.sql, then
-- shardext--1.0--1.1.sql, then this file (there is deliberately no
-- shardext--1.2.sql), so a fresh install and an upgraded one end up with
-- the same objects by construction.  1.0 and 1.1 are released: their
-- scripts never change again.  Each section below belongs to one feature;
-- keep new objects in the section of theirs, and keep the script the same
-- for every PostgreSQL major version.
\echo Use "ALTER EXTENSION shardext UPDATE TO '1.2'" to load this file. \quit
