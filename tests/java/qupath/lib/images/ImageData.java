package qupath.lib.images;

import qupath.lib.images.servers.ImageServer;
import qupath.lib.objects.hierarchy.PathObjectHierarchy;

/** An open image and its type (QuPath: qupath-core .../images/ImageData.java). */
public class ImageData<T> {
    /** QuPath's image types, in QuPath's order. */
    public enum ImageType { BRIGHTFIELD_H_DAB, BRIGHTFIELD_H_E, BRIGHTFIELD_OTHER, FLUORESCENCE, OTHER, UNSET }

    private final ImageServer<T> server;
    private ImageType type = ImageType.UNSET;
    private final PathObjectHierarchy hierarchy = new PathObjectHierarchy();

    public ImageData(ImageServer<T> server) {
        this.server = server;
    }

    public ImageServer<T> getServer() {
        return server;
    }

    public PathObjectHierarchy getHierarchy() {
        return hierarchy;
    }

    public ImageType getImageType() {
        return type;
    }

    public void setImageType(final ImageType type) throws IllegalArgumentException {
        if (type == null) {
            throw new IllegalArgumentException("Image type cannot be null");
        }
        this.type = type;
    }
}
