package configdb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"sort"
)

// ListComponents returns every component with its resource definitions, by id.
func (s *Store) ListComponents(ctx context.Context) ([]Component, error) {
	return readValue(ctx, s, func(t *txn) ([]Component, error) {
		return t.components(`SELECT id, name FROM components ORDER BY id`)
	})
}

// GetComponent returns one component.
func (s *Store) GetComponent(ctx context.Context, id int64) (Component, error) {
	return readValue(ctx, s, func(t *txn) (Component, error) { return t.component(id) })
}

func (t *txn) components(query string, args ...any) ([]Component, error) {
	out, err := queryAll(t, func(rows *sql.Rows) (Component, error) {
		var c Component
		err := rows.Scan(&c.ID, &c.Name)
		return c, err
	}, query, args...)
	if err != nil {
		return nil, err
	}
	defs, err := t.resourceDefinitions(`SELECT id, name, component_id, content FROM resource_definitions
		WHERE component_id IS NOT NULL ORDER BY id`)
	if err != nil {
		return nil, err
	}
	byComponent := map[int64][]ResourceDefinition{}
	for _, d := range defs {
		byComponent[*d.ComponentID] = append(byComponent[*d.ComponentID], d)
	}
	for i := range out {
		out[i].ResourceDefinitions = byComponent[out[i].ID]
		if out[i].ResourceDefinitions == nil {
			out[i].ResourceDefinitions = []ResourceDefinition{}
		}
	}
	return out, nil
}

func (t *txn) component(id int64) (Component, error) {
	c := Component{ID: id}
	err := t.queryRow(`SELECT name FROM components WHERE id = ?`, id).Scan(&c.Name)
	if errors.Is(err, sql.ErrNoRows) {
		return c, errorf(NotFound, "component not found by identifier: %d", id)
	}
	if err != nil {
		return c, err
	}
	c.ResourceDefinitions, err = t.resourceDefinitions(`SELECT id, name, component_id, content FROM resource_definitions
		WHERE component_id = ? ORDER BY id`, id)
	return c, err
}

func (t *txn) resourceDefinitions(query string, args ...any) ([]ResourceDefinition, error) {
	return queryAll(t, func(rows *sql.Rows) (ResourceDefinition, error) {
		var d ResourceDefinition
		var comp sql.NullInt64
		var content string
		if err := rows.Scan(&d.ID, &d.Name, &comp, &content); err != nil {
			return d, err
		}
		if comp.Valid {
			d.ComponentID = &comp.Int64
		}
		d.Content = json.RawMessage(content)
		return d, nil
	}, query, args...)
}

func (t *txn) resourceDefinition(id int64) (ResourceDefinition, error) {
	defs, err := t.resourceDefinitions(`SELECT id, name, component_id, content FROM resource_definitions WHERE id = ?`, id)
	if err != nil {
		return ResourceDefinition{}, err
	}
	if len(defs) == 0 {
		return ResourceDefinition{}, errorf(NotFound, "resource_definition not found by identifier: %d", id)
	}
	return defs[0], nil
}

// CreateComponent creates a component with its resource definitions.
func (s *Store) CreateComponent(ctx context.Context, author string, nc NewComponent) (Component, error) {
	if nc.Name == "" {
		return Component{}, invalidField("name", "name is required")
	}
	seen := map[string]bool{}
	for i, d := range nc.ResourceDefinitions {
		if d.Name == "" {
			return Component{}, invalidField("resource_definitions["+itoa(i)+"].name", "resource definition %d has no name", i)
		}
		if seen[d.Name] {
			return Component{}, errorf(Conflict, "resource definition %q is given twice", d.Name)
		}
		seen[d.Name] = true
	}
	var c Component
	err := s.writeCatalog(ctx, func(t *txn) error {
		if err := t.nameFree(nc.Name, 0); err != nil {
			return err
		}
		id, err := t.nextCounter("next_component_id")
		if err != nil {
			return err
		}
		if _, err := t.exec(`INSERT INTO components (id, name) VALUES (?, ?)`, id, nc.Name); err != nil {
			return err
		}
		for _, d := range nc.ResourceDefinitions {
			d.ID, d.ComponentID = 0, &id
			if _, err := t.insertResourceDefinition(d); err != nil {
				return err
			}
		}
		if c, err = t.component(id); err != nil {
			return err
		}
		return s.emitComponent(t, eventCreated, author, c)
	})
	return c, err
}

func (t *txn) nameFree(name string, self int64) error {
	var other int64
	err := t.queryRow(`SELECT id FROM components WHERE name = ?`, name).Scan(&other)
	switch {
	case errors.Is(err, sql.ErrNoRows) || (err == nil && other == self):
		return nil
	case err != nil:
		return err
	}
	return errorf(Conflict, "component name %q is already taken by component %d", name, other)
}

// insertResourceDefinition checks and inserts a definition; the catalog is
// locked by the caller.
func (t *txn) insertResourceDefinition(d NewResourceDefinition) (int64, error) {
	content := []byte("null")
	if d.Content != nil {
		var err error
		if content, err = Canonical(d.Content); err != nil {
			return 0, err
		}
	}
	if d.ComponentID != nil {
		if err := t.defNameFree(*d.ComponentID, d.Name, 0); err != nil {
			return 0, err
		}
	}
	id := d.ID
	if id == 0 {
		var err error
		if id, err = t.nextCounter("next_resource_definition_id"); err != nil {
			return 0, err
		}
	} else {
		var n int
		if err := t.queryRow(`SELECT COUNT(*) FROM resource_definitions WHERE id = ?`, id).Scan(&n); err != nil {
			return 0, err
		}
		if n > 0 {
			return 0, errorf(Conflict, "resource_definition %d already exists", id)
		}
		if err := t.raiseCounter("next_resource_definition_id", id); err != nil {
			return 0, err
		}
	}
	_, err := t.exec(`INSERT INTO resource_definitions (id, name, component_id, content) VALUES (?, ?, ?, ?)`,
		id, d.Name, nullableID(d.ComponentID), string(content))
	return id, err
}

// defNameFree checks that a component has no other definition by that name.
func (t *txn) defNameFree(component int64, name string, self int64) error {
	var other int64
	err := t.queryRow(`SELECT id FROM resource_definitions WHERE component_id = ? AND name = ? AND id <> ?`, component, name, self).Scan(&other)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return errorf(Conflict, "component %d already has a resource definition named %q (%d)", component, name, other)
}

func nullableID(id *int64) any {
	if id == nil {
		return nil
	}
	return *id
}

// UpdateComponent renames a component and/or replaces its resource
// definitions.
func (s *Store) UpdateComponent(ctx context.Context, author string, id int64, u ComponentUpdate) error {
	if u.Name != nil && *u.Name == "" {
		return invalidField("name", "name may not be empty")
	}
	return s.writeCatalog(ctx, func(t *txn) error {
		before, err := t.component(id)
		if err != nil {
			return err
		}
		if u.Name != nil {
			if err := t.nameFree(*u.Name, id); err != nil {
				return err
			}
			if _, err := t.exec(`UPDATE components SET name = ? WHERE id = ?`, *u.Name, id); err != nil {
				return err
			}
		}
		touched := map[int64]bool{}
		if u.ResourceDefinitions != nil {
			keep := map[int64]bool{}
			for _, defID := range *u.ResourceDefinitions {
				d, err := t.resourceDefinition(defID)
				if err != nil {
					return err
				}
				keep[defID] = true
				if d.ComponentID != nil && *d.ComponentID != id {
					touched[*d.ComponentID] = true
				}
			}
			var dropped []int64
			for _, d := range before.ResourceDefinitions {
				if !keep[d.ID] {
					dropped = append(dropped, d.ID)
				}
			}
			if err := t.deleteDefinitions(dropped); err != nil {
				return err
			}
			for defID := range keep {
				d, _ := t.resourceDefinition(defID)
				if err := t.defNameFree(id, d.Name, defID); err != nil {
					return err
				}
				if _, err := t.exec(`UPDATE resource_definitions SET component_id = ? WHERE id = ?`, id, defID); err != nil {
					return err
				}
			}
		}
		return s.emitComponentsUpdated(t, author, append(sortedIDs(touched), id))
	})
}

// writeEnv is write with environment env locked first, as every change to
// an environment or to what is stored in it is.
func (s *Store) writeEnv(ctx context.Context, env int64, fn func(t *txn) error) error {
	return s.write(ctx, func(t *txn) error {
		if err := t.lockEnv(env); err != nil {
			return err
		}
		return fn(t)
	})
}

// writeCatalog is write with the catalog locked first, as every change to
// components and resource definitions is.
func (s *Store) writeCatalog(ctx context.Context, fn func(t *txn) error) error {
	return s.write(ctx, func(t *txn) error {
		if err := t.lockCatalog(); err != nil {
			return err
		}
		return fn(t)
	})
}

// emitDefinitionComponent emits the update of d's component, if it has one.
func (s *Store) emitDefinitionComponent(t *txn, author string, d ResourceDefinition) error {
	if d.ComponentID == nil {
		return nil
	}
	return s.emitComponentsUpdated(t, author, []int64{*d.ComponentID})
}

func (s *Store) emitComponentsUpdated(t *txn, author string, ids []int64) error {
	done := map[int64]bool{}
	for _, id := range ids {
		if done[id] {
			continue
		}
		done[id] = true
		c, err := t.component(id)
		if err != nil {
			return err
		}
		if err := s.emitComponent(t, eventUpdated, author, c); err != nil {
			return err
		}
	}
	return nil
}

func sortedIDs(m map[int64]bool) []int64 {
	ids := make([]int64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// DeleteComponent deletes a component, its resource definitions and every
// document stored for them.
func (s *Store) DeleteComponent(ctx context.Context, author string, id int64) error {
	return s.writeCatalog(ctx, func(t *txn) error {
		c, err := t.component(id)
		if err != nil {
			return err
		}
		envs, err := t.ids(`SELECT environment_id FROM environment_components WHERE component_id = ? ORDER BY environment_id`, id)
		if err != nil {
			return err
		}
		defs := make([]int64, len(c.ResourceDefinitions))
		for i, d := range c.ResourceDefinitions {
			defs[i] = d.ID
		}
		if err := t.deleteDefinitions(defs); err != nil {
			return err
		}
		if _, err := t.exec(`DELETE FROM components WHERE id = ?`, id); err != nil {
			return err
		}
		if err := s.emitComponent(t, eventDeleted, author, c); err != nil {
			return err
		}
		// The environments that used it lost a component.
		for _, envID := range envs {
			if err := t.lockEnv(envID); err != nil {
				return err
			}
			if err := s.emitEnvironmentUpdated(t, author, envID); err != nil {
				return err
			}
		}
		return nil
	})
}

// ListResourceDefinitions returns resource definitions by id, all or those of
// one component.
func (s *Store) ListResourceDefinitions(ctx context.Context, f ResourceDefinitionFilter) ([]ResourceDefinition, error) {
	return readValue(ctx, s, func(t *txn) ([]ResourceDefinition, error) {
		switch {
		case !f.ByComponent:
			return t.resourceDefinitions(`SELECT id, name, component_id, content FROM resource_definitions ORDER BY id`)
		case f.ComponentID == nil:
			return t.resourceDefinitions(`SELECT id, name, component_id, content FROM resource_definitions WHERE component_id IS NULL ORDER BY id`)
		}
		return t.resourceDefinitions(`SELECT id, name, component_id, content FROM resource_definitions WHERE component_id = ? ORDER BY id`, *f.ComponentID)
	})
}

// GetResourceDefinition returns one resource definition.
func (s *Store) GetResourceDefinition(ctx context.Context, id int64) (ResourceDefinition, error) {
	return readValue(ctx, s, func(t *txn) (ResourceDefinition, error) { return t.resourceDefinition(id) })
}

// CreateResourceDefinition creates a resource definition, in a component or
// in none.
func (s *Store) CreateResourceDefinition(ctx context.Context, author string, nd NewResourceDefinition) (ResourceDefinition, error) {
	if nd.Name == "" {
		return ResourceDefinition{}, invalidField("name", "name is required")
	}
	if nd.ID < 0 {
		return ResourceDefinition{}, invalidField("id", "id must be positive")
	}
	var d ResourceDefinition
	err := s.writeCatalog(ctx, func(t *txn) error {
		if nd.ComponentID != nil {
			if _, err := t.component(*nd.ComponentID); err != nil {
				return err
			}
		}
		id, err := t.insertResourceDefinition(nd)
		if err != nil {
			return err
		}
		if d, err = t.resourceDefinition(id); err != nil {
			return err
		}
		return s.emitDefinitionComponent(t, author, d)
	})
	return d, err
}

// UpdateResourceDefinition changes a resource definition's name, component or
// content.
func (s *Store) UpdateResourceDefinition(ctx context.Context, author string, id int64, u ResourceDefinitionUpdate) error {
	if u.Name != nil && *u.Name == "" {
		return invalidField("name", "name may not be empty")
	}
	var content []byte
	if u.Content != nil {
		var err error
		if content, err = Canonical(*u.Content); err != nil {
			return err
		}
	}
	return s.writeCatalog(ctx, func(t *txn) error {
		d, err := t.resourceDefinition(id)
		if err != nil {
			return err
		}
		var affected []int64
		if d.ComponentID != nil {
			affected = append(affected, *d.ComponentID)
		}
		if u.Name != nil {
			d.Name = *u.Name
		}
		if u.SetComponent {
			if u.ComponentID != nil {
				if _, err := t.component(*u.ComponentID); err != nil {
					return err
				}
				affected = append(affected, *u.ComponentID)
			}
			d.ComponentID = u.ComponentID
		}
		if d.ComponentID != nil {
			if err := t.defNameFree(*d.ComponentID, d.Name, id); err != nil {
				return err
			}
		}
		if content != nil {
			d.Content = content
		}
		if _, err := t.exec(`UPDATE resource_definitions SET name = ?, component_id = ?, content = ? WHERE id = ?`,
			d.Name, nullableID(d.ComponentID), string(d.Content), id); err != nil {
			return err
		}
		return s.emitComponentsUpdated(t, author, affected)
	})
}

// DeleteResourceDefinition deletes a resource definition and every document
// stored for it.
func (s *Store) DeleteResourceDefinition(ctx context.Context, author string, id int64) error {
	return s.writeCatalog(ctx, func(t *txn) error {
		d, err := t.resourceDefinition(id)
		if err != nil {
			return err
		}
		if err := t.deleteDefinitions([]int64{id}); err != nil {
			return err
		}
		return s.emitDefinitionComponent(t, author, d)
	})
}

// ResourceDefinitionKeys applies a keys operation to a definition's content,
// atomically.
func (s *Store) ResourceDefinitionKeys(ctx context.Context, author string, id int64, op KeysOp, paths []KeyPath) error {
	return s.writeCatalog(ctx, func(t *txn) error {
		d, err := t.resourceDefinition(id)
		if err != nil {
			return err
		}
		content, err := applyKeys(d.Content, op, paths)
		if err != nil {
			return err
		}
		if _, err := t.exec(`UPDATE resource_definitions SET content = ? WHERE id = ?`, string(content), id); err != nil {
			return err
		}
		return s.emitDefinitionComponent(t, author, d)
	})
}
