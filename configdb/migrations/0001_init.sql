-- ConfigDB schema, for SQLite and PostgreSQL alike. {{AUTO_ID}} is the one
-- difference: an auto-incrementing 64-bit primary key that never reuses ids.

-- Counters and generations. catalog_generation changes on every write to
-- components or resource definitions, which invalidates cached merges.
CREATE TABLE configdb_meta (
    name  TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);
INSERT INTO configdb_meta (name, value) VALUES
    ('catalog_generation', 1),
    ('next_component_id', 1),
    ('next_resource_definition_id', 1),
    ('next_environment_id', 1);

CREATE TABLE components (
    id   BIGINT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);

CREATE TABLE resource_definitions (
    id           BIGINT PRIMARY KEY,
    name         TEXT NOT NULL,
    component_id BIGINT REFERENCES components (id) ON DELETE CASCADE,
    content      TEXT NOT NULL
);
CREATE UNIQUE INDEX resource_definitions_component_name ON resource_definitions (component_id, name);
CREATE INDEX resource_definitions_name ON resource_definitions (name);

-- generation is a random number replaced on every write that can change the
-- environment's merged values; cached merges carry the one they were built at.
CREATE TABLE environments (
    id         BIGINT PRIMARY KEY,
    generation BIGINT NOT NULL
);

CREATE TABLE environment_components (
    environment_id BIGINT NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    component_id   BIGINT NOT NULL REFERENCES components (id) ON DELETE CASCADE,
    position       INTEGER NOT NULL,
    PRIMARY KEY (environment_id, component_id)
);
CREATE INDEX environment_components_component ON environment_components (component_id);

CREATE TABLE hierarchy_levels (
    id             {{AUTO_ID}},
    environment_id BIGINT NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    name           TEXT NOT NULL,
    position       INTEGER NOT NULL,
    UNIQUE (environment_id, name)
);

-- The level values documents were written under, for GET hierarchy_levels.
CREATE TABLE level_values (
    level_id BIGINT NOT NULL REFERENCES hierarchy_levels (id) ON DELETE CASCADE,
    value    TEXT NOT NULL,
    PRIMARY KEY (level_id, value)
);

-- One row per environment, resource and level path (tuning-box's
-- resource_values). level_path is the JSON [[level id, "value"], ...], "[]"
-- for the root. The *_ref columns point at the current document_versions row.
CREATE TABLE documents (
    id                     {{AUTO_ID}},
    environment_id         BIGINT NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    resource_definition_id BIGINT NOT NULL REFERENCES resource_definitions (id) ON DELETE CASCADE,
    level_path             TEXT NOT NULL,
    values_version         BIGINT NOT NULL DEFAULT 0,
    values_ref             BIGINT,
    overrides_version      BIGINT NOT NULL DEFAULT 0,
    overrides_ref          BIGINT,
    UNIQUE (environment_id, resource_definition_id, level_path)
);

-- Every version of every document, immutable. Its id is the document's ETag.
CREATE TABLE document_versions (
    id          {{AUTO_ID}},
    document_id BIGINT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    version     BIGINT NOT NULL,
    created_at  BIGINT NOT NULL,
    author      TEXT NOT NULL,
    changed     TEXT NOT NULL,
    body        TEXT NOT NULL,
    UNIQUE (document_id, kind, version)
);

-- The transactional outbox: events of committed changes not yet published.
CREATE TABLE outbox (
    id         {{AUTO_ID}},
    msg_id     TEXT NOT NULL,
    topic      TEXT NOT NULL,
    payload    TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
