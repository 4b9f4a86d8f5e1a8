package qupath.lib.images.servers;

/** Name and magnification of an image (QuPath: qupath-core .../servers/ImageServerMetadata.java). */
public class ImageServerMetadata {
    private final String name;
    private final double magnification;

    public ImageServerMetadata(String name, double magnification) {
        this.name = name;
        this.magnification = magnification;
    }

    public String getName() {
        return name;
    }

    public double getMagnification() {
        return magnification;
    }
}
