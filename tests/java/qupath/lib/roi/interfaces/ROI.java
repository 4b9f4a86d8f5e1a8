package qupath.lib.roi.interfaces;

import qupath.lib.regions.ImagePlane;

/** A region of interest (QuPath: qupath-core .../roi/interfaces/ROI.java; the methods the bridge reads). */
public interface ROI {
    String getRoiName();

    ImagePlane getImagePlane();

    double getCentroidX();

    double getCentroidY();

    double getBoundsX();

    double getBoundsY();

    double getBoundsWidth();

    double getBoundsHeight();

    int getNumPoints();

    boolean isPoint();

    boolean isArea();

    double getArea();
}
