-- Which database this schema's Redis keys belong to (src/cache/cache.ts): drawn at random by migration 000006.
select cache_instance from :PGONCE_SCHEMA.settings
