-- Which database this schema's Redis keys belong to (src/cache/cache.ts): drawn at random when the schema was created.
select cache_instance from :PGONCE_SCHEMA.settings
