package qupath.lib.objects;

import qupath.lib.objects.classes.PathClass;
import qupath.lib.roi.interfaces.ROI;

/** An annotation (QuPath: qupath-core .../objects/PathAnnotationObject.java). */
public class PathAnnotationObject extends PathROIObject {
    PathAnnotationObject(ROI roi, PathClass pathClass) {
        super(roi, pathClass);
    }

    @Override
    public boolean isAnnotation() {
        return true;
    }
}
