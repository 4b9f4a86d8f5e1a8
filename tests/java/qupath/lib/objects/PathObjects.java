package qupath.lib.objects;

import qupath.lib.objects.classes.PathClass;
import qupath.lib.roi.interfaces.ROI;

/** Factory of path objects (QuPath: qupath-core .../objects/PathObjects.java). */
public class PathObjects {
    private PathObjects() {
    }

    public static PathObject createAnnotationObject(final ROI roi, final PathClass pathClass) {
        if (roi == null) {
            throw new IllegalArgumentException("A ROI is required to create an annotation object!");
        }
        return new PathAnnotationObject(roi, pathClass);
    }

    public static PathObject createAnnotationObject(final ROI roi) {
        return createAnnotationObject(roi, null);
    }
}
