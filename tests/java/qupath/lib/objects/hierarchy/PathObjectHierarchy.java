package qupath.lib.objects.hierarchy;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

import medcopilot.fixture.Faults;
import qupath.lib.objects.PathObject;

/**
 * An image's objects (QuPath: qupath-core .../objects/hierarchy/PathObjectHierarchy.java): add one or many (many
 * fire one change event), remove, list annotations, fire change events. Flat here: no parent/child nesting.
 */
public final class PathObjectHierarchy {
    private final List<PathObject> objects = new ArrayList<>();

    public boolean addObject(PathObject pathObject) {
        return addObject(pathObject, true);
    }

    public synchronized boolean addObject(PathObject pathObject, boolean fireUpdate) {
        if (pathObject == null || !pathObject.hasROI()) {
            return false;
        }
        Faults.beforeAdd(this);
        objects.add(pathObject);
        if (fireUpdate) {
            fireHierarchyChangedEvent(this);
        }
        return true;
    }

    public synchronized boolean addObjects(Collection<? extends PathObject> pathObjects) {
        boolean changes = false;
        for (PathObject pathObject : pathObjects) {
            changes = addObject(pathObject, false) || changes;
        }
        if (changes) {
            fireHierarchyChangedEvent(this);
        }
        return changes;
    }

    public synchronized void removeObjects(Collection<? extends PathObject> pathObjects, boolean keepChildren) {
        if (objects.removeAll(pathObjects)) {
            fireHierarchyChangedEvent(this);
        }
    }

    public synchronized Collection<PathObject> getAnnotationObjects() {
        List<PathObject> out = new ArrayList<>();
        for (PathObject o : objects) {
            if (o.isAnnotation()) {
                out.add(o);
            }
        }
        return out;
    }

    public void fireHierarchyChangedEvent(Object source) {
        Faults.changed(this);
    }
}
