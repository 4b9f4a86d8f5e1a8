package qupath.lib.roi;

import qupath.lib.regions.ImagePlane;
import qupath.lib.roi.interfaces.ROI;

/** Factory of ROIs (QuPath: qupath-core .../roi/ROIs.java). */
public class ROIs {
    private ROIs() {
    }

    public static ROI createPointsROI(double x, double y, ImagePlane plane) {
        return new PointsROI(x, y, plane);
    }

    public static ROI createRectangleROI(double x, double y, double width, double height, ImagePlane plane) {
        return new RectangleROI(x, y, width, height, plane);
    }
}
