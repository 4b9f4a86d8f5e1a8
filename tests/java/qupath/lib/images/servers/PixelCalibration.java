package qupath.lib.images.servers;

/** Pixel size in micrometres (QuPath: qupath-core .../servers/PixelCalibration.java). */
public class PixelCalibration {
    private final double pixelWidth;
    private final double pixelHeight;

    public PixelCalibration(double pixelWidth, double pixelHeight) {
        this.pixelWidth = pixelWidth;
        this.pixelHeight = pixelHeight;
    }

    public boolean hasPixelSizeMicrons() {
        return Double.isFinite(pixelWidth) && Double.isFinite(pixelHeight);
    }

    public double getPixelWidthMicrons() {
        return pixelWidth;
    }

    public double getPixelHeightMicrons() {
        return pixelHeight;
    }
}
