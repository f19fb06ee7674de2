package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/opsfirehose/firehose/configdb"
)

func (q *request) ctxAuthor() string { return q.id.Name }

// collection serves a collection route: GET answers list's result, POST
// hands the body to create, which returns the new object and its path under
// BasePath. Errors, the body's included, are answered by fail.
func collection[L, T any](q *request, list func(context.Context) (L, error),
	create func(ctx context.Context, author string, o jsonObject) (string, T, error)) {
	ctx := q.r.Context()
	if q.r.Method != http.MethodPost {
		q.ok(list(ctx))
		return
	}
	o, ok := q.object()
	if !ok {
		return
	}
	location, v, err := create(ctx, q.ctxAuthor(), o)
	if err != nil {
		q.fail(err)
		return
	}
	q.created(location, v)
}

// item serves one object's route: GET answers get's result, DELETE calls
// del, and PUT or PATCH hand the body to update, which changes the fields
// given. Errors, the body's included, are answered by fail.
func item[T any](q *request, get func(context.Context) (T, error),
	del func(ctx context.Context, author string) error,
	update func(ctx context.Context, author string, o jsonObject) error) {
	ctx := q.r.Context()
	switch q.r.Method {
	case http.MethodGet, http.MethodHead:
		q.ok(get(ctx))
		return
	case http.MethodDelete:
		if err := del(ctx, q.ctxAuthor()); err != nil {
			q.fail(err)
			return
		}
	default: // PUT and PATCH
		o, ok := q.object()
		if !ok {
			return
		}
		if err := update(ctx, q.ctxAuthor(), o); err != nil {
			q.fail(err)
			return
		}
	}
	q.noContent("")
}

// optional sets *dst to the value of field when the body has it, for the
// updates that change only the fields given; get is a jsonObject reader.
func optional[T any](dst **T, get func(field string, required bool) (T, bool, error), field string) error {
	v, present, err := get(field, false)
	if err != nil || !present {
		return err
	}
	*dst = &v
	return nil
}

// components serves /components: GET lists, POST creates with inline
// resource definitions.
func (q *request) components() {
	store := q.h.store
	collection(q, store.ListComponents, func(ctx context.Context, author string, o jsonObject) (string, configdb.Component, error) {
		nc, err := parseNewComponent(o)
		if err != nil {
			return "", configdb.Component{}, err
		}
		c, err := store.CreateComponent(ctx, author, nc)
		return "/components/" + strconv.FormatInt(c.ID, 10), c, err
	})
}

func parseNewComponent(o jsonObject) (configdb.NewComponent, error) {
	var nc configdb.NewComponent
	var err error
	if nc.Name, _, err = o.str("name", true); err != nil {
		return nc, err
	}
	defs, _, err := o.objects("resource_definitions")
	if err != nil {
		return nc, err
	}
	for i, d := range defs {
		name, _, err := d.str("name", true)
		if err != nil {
			return nc, invalid(fmt.Sprintf("resource_definitions[%d].name", i), "resource_definitions[%d].name is required and must be a string", i)
		}
		nd := configdb.NewResourceDefinition{Name: name}
		if raw, ok := d["content"]; ok {
			nd.Content = raw
		}
		nc.ResourceDefinitions = append(nc.ResourceDefinitions, nd)
	}
	return nc, nil
}

// component serves /components/<id>.
func (q *request) component(id int64) {
	store := q.h.store
	item(q,
		func(ctx context.Context) (configdb.Component, error) { return store.GetComponent(ctx, id) },
		func(ctx context.Context, author string) error { return store.DeleteComponent(ctx, author, id) },
		func(ctx context.Context, author string, o jsonObject) error {
			var u configdb.ComponentUpdate
			if err := optional(&u.Name, o.str, "name"); err != nil {
				return err
			}
			defs, present, err := o.objects("resource_definitions")
			if err != nil {
				return err
			}
			if present {
				ids := []int64{}
				for i, d := range defs {
					defID, ok, err := d.id("id", false)
					if err != nil || !ok {
						return invalid(fmt.Sprintf("resource_definitions[%d].id", i), "resource_definitions[%d] must be {\"id\": N}", i)
					}
					ids = append(ids, *defID)
				}
				u.ResourceDefinitions = &ids
			}
			return store.UpdateComponent(ctx, author, id, u)
		})
}

// resourceDefinitions serves /resource_definitions: GET lists, optionally
// ?component_id= (empty: no component), POST creates.
func (q *request) resourceDefinitions() {
	store := q.h.store
	list := func(ctx context.Context) ([]configdb.ResourceDefinition, error) {
		var f configdb.ResourceDefinitionFilter
		if vals, ok := q.r.URL.Query()["component_id"]; ok {
			f.ByComponent = true
			if v := vals[0]; v != "" {
				id, ok := configdb.ParseID(v)
				if !ok {
					return nil, invalid("component_id", "component_id must be an integer, or empty for definitions without a component")
				}
				f.ComponentID = &id
			}
		}
		return store.ListResourceDefinitions(ctx, f)
	}
	collection(q, list, func(ctx context.Context, author string, o jsonObject) (string, configdb.ResourceDefinition, error) {
		var nd configdb.NewResourceDefinition
		var err error
		if nd.Name, _, err = o.str("name", true); err != nil {
			return "", configdb.ResourceDefinition{}, err
		}
		if nd.ComponentID, _, err = o.id("component_id", true); err != nil {
			return "", configdb.ResourceDefinition{}, err
		}
		id, _, err := o.id("id", true)
		if err != nil {
			return "", configdb.ResourceDefinition{}, err
		}
		if id != nil {
			nd.ID = *id
		}
		if raw, ok := o["content"]; ok {
			nd.Content = raw
		}
		d, err := store.CreateResourceDefinition(ctx, author, nd)
		return "/resource_definitions/" + strconv.FormatInt(d.ID, 10), d, err
	})
}

// resourceDefinition serves /resource_definitions/<id>.
func (q *request) resourceDefinition(id int64) {
	store := q.h.store
	item(q,
		func(ctx context.Context) (configdb.ResourceDefinition, error) {
			return store.GetResourceDefinition(ctx, id)
		},
		func(ctx context.Context, author string) error { return store.DeleteResourceDefinition(ctx, author, id) },
		func(ctx context.Context, author string, o jsonObject) error {
			var u configdb.ResourceDefinitionUpdate
			if err := optional(&u.Name, o.str, "name"); err != nil {
				return err
			}
			var err error
			if u.ComponentID, u.SetComponent, err = o.id("component_id", true); err != nil {
				return err
			}
			if raw, ok := o["content"]; ok {
				content := json.RawMessage(raw)
				u.Content = &content
			}
			return store.UpdateResourceDefinition(ctx, author, id, u)
		})
}

// resourceDefinitionKeys serves /resource_definitions/<id>/keys/<op>.
func (q *request) resourceDefinitionKeys(id int64, op string) {
	body, ok := q.body()
	if !ok {
		return
	}
	paths, err := configdb.ParseKeysBatch(configdb.KeysOp(op), body)
	if err != nil {
		q.fail(err)
		return
	}
	if err := q.h.store.ResourceDefinitionKeys(q.r.Context(), q.ctxAuthor(), id, configdb.KeysOp(op), paths); err != nil {
		q.fail(err)
		return
	}
	q.noContent("")
}

// environments serves /environments: GET lists, POST creates, keeping a
// given id.
func (q *request) environments() {
	store := q.h.store
	collection(q, store.ListEnvironments, func(ctx context.Context, author string, o jsonObject) (string, configdb.Environment, error) {
		var ne configdb.NewEnvironment
		id, _, err := o.id("id", true)
		if err != nil {
			return "", configdb.Environment{}, err
		}
		if id != nil {
			ne.ID = *id
		}
		if ne.Components, _, err = o.refs("components", true); err != nil {
			return "", configdb.Environment{}, err
		}
		if ne.HierarchyLevels, _, err = o.strings("hierarchy_levels", true); err != nil {
			return "", configdb.Environment{}, err
		}
		env, err := store.CreateEnvironment(ctx, author, ne)
		return "/environments/" + strconv.FormatInt(env.ID, 10), env, err
	})
}

// environment serves /environments/<id>.
func (q *request) environment(id int64) {
	store := q.h.store
	item(q,
		func(ctx context.Context) (configdb.Environment, error) { return store.GetEnvironment(ctx, id) },
		func(ctx context.Context, author string) error { return store.DeleteEnvironment(ctx, author, id) },
		func(ctx context.Context, author string, o jsonObject) error {
			var u configdb.EnvironmentUpdate
			if err := optional(&u.Components, o.refs, "components"); err != nil {
				return err
			}
			if err := optional(&u.HierarchyLevels, o.strings, "hierarchy_levels"); err != nil {
				return err
			}
			return store.UpdateEnvironment(ctx, author, id, u)
		})
}

// levels serves /environments/<id>/hierarchy_levels.
func (q *request) levels(env int64) {
	q.ok(q.h.store.ListLevels(q.r.Context(), env))
}

// level serves /environments/<id>/hierarchy_levels/<id or name>: GET, and PUT
// or PATCH to rename.
func (q *request) level(env int64, level string) {
	ctx := q.r.Context()
	if q.r.Method == http.MethodGet || q.r.Method == http.MethodHead {
		q.ok(q.h.store.GetLevel(ctx, env, level))
		return
	}
	o, ok := q.object()
	if !ok {
		return
	}
	name, present, err := o.str("name", false)
	if err != nil {
		q.fail(err)
		return
	}
	if present {
		if err := q.h.store.RenameLevel(ctx, q.ctxAuthor(), env, level, name); err != nil {
			q.fail(err)
			return
		}
	} else if _, err := q.h.store.GetLevel(ctx, env, level); err != nil {
		q.fail(err)
		return
	}
	q.noContent("")
}
