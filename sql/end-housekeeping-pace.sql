-- A paced housekeeping round that wrote a pause (sql/pace-housekeeping.sql) has ended, or was stopped by its
-- worker's close: runner $1's pause ends now, so that other runners need not wait for it.
delete from :PGONCE_SCHEMA.housekeeping_pace where runner = $1::uuid
