/* state.ts -- one entity's property values as the client holds them: the
 * class defaults until the server sends a value, decoded change lists
 * applied (reporting what changed, as entity_state marks dirty), and the
 * JSON view entity_state_to_json writes. Values are replaced, never changed
 * in place, so a default may be shared by every entity of its class. */

import type { ClassDefinition } from './definitions.js';
import type { PropertyChange } from './property-codec.js';
import { valueFromDefault, valuesEqual, valueToJson, type JsonView, type Value } from './values.js';

const classDefaults = new WeakMap<ClassDefinition, readonly Value[]>();

function defaultsOf(cls: ClassDefinition): readonly Value[] {
    let values = classDefaults.get(cls);
    if (!values) {
        values = cls.properties.map((p) => valueFromDefault(p.type, p.defaultValue));
        classDefaults.set(cls, values);
    }
    return values;
}

export class EntityState {
    readonly cls: ClassDefinition;
    /* By property id. Read-only for callers. */
    readonly values: Value[];
    /* The same values by property name. Read-only for callers. */
    readonly properties: { [name: string]: Value };

    constructor(cls: ClassDefinition) {
        this.cls = cls;
        this.values = defaultsOf(cls).slice();
        this.properties = {};
        cls.properties.forEach((p, id) => (this.properties[p.name] = this.values[id]));
    }

    /* Applies decoded changes; returns the ids whose value changed, in order. */
    apply(changes: readonly PropertyChange[]): number[] {
        const changed: number[] = [];
        for (const { id, value } of changes) {
            if (valuesEqual(this.values[id], value)) continue;
            this.values[id] = value;
            this.properties[this.cls.properties[id].name] = value;
            changed.push(id);
        }
        return changed;
    }

    /* { property name: value } for every property (or those in `only`), in
     * id order, in entity_state_json.h's shape. */
    toJson(only?: ReadonlySet<number>): { [name: string]: JsonView } {
        const out: { [name: string]: JsonView } = {};
        this.cls.properties.forEach((p, id) => {
            if (only === undefined || only.has(id)) out[p.name] = valueToJson(p.type, this.values[id]);
        });
        return out;
    }
}
