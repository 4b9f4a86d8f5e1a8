/*
 * Export BRACS annotations to GeoJSON in one run, one FeatureCollection per slide, named
 * <slide id>.qpdata.geojson (a name the MedCopilot BRACS adapter reads).
 *
 * Either a folder of QuPath data files as BRACS ships them (BRACS_WSI_Annotations/<split>/Group_*/
 * Type_*/BRACS_<id>.qpdata, searched recursively), read without opening the slides:
 *   QuPath script export_bracs_geojson.groovy --args=/path/to/BRACS_WSI_Annotations --args=/path/to/output
 * or the images of a QuPath project:
 *   QuPath script export_bracs_geojson.groovy --project=/path/to/project.qpproj --args=/path/to/output
 *
 * Coordinates are level-0 pixels; class names are kept as in QuPath (DCIS-sure, Malignant-sure, ...).
 * Uses qupath.lib.io.PathIO.readHierarchy and PathIO.exportObjectsAsGeoJSON (QuPath >= 0.4).
 */
import qupath.lib.io.PathIO
import qupath.lib.io.PathIO.GeoJsonExportOptions

def fc = GeoJsonExportOptions.FEATURE_COLLECTION
def exportOne = { String name, hierarchy, File outDir ->
    def annotations = hierarchy.getAnnotationObjects()
    PathIO.exportObjectsAsGeoJSON(new File(outDir, name + '.qpdata.geojson'), annotations, fc)
    println(name + ': ' + annotations.size() + ' annotations')
}

int written = 0
def project = getProject()
if (args.size() >= 2) {
    def inDir = new File(args[0])
    def outDir = new File(args[1])
    outDir.mkdirs()
    inDir.eachFileRecurse { f ->
        if (f.isFile() && f.name.endsWith('.qpdata')) {
            exportOne(f.name[0..<-('.qpdata'.length())], PathIO.readHierarchy(f), outDir)
            written++
        }
    }
    println('Exported ' + written + ' .qpdata files to ' + outDir)
} else if (project != null) {
    def outDir = (args.size() == 1) ? new File(args[0]) : new File(buildFilePath(PROJECT_BASE_DIR, 'geojson'))
    outDir.mkdirs()
    for (entry in project.getImageList()) {
        exportOne(entry.getImageName().replaceFirst(/\.[^.]+$/, ''), entry.readHierarchy(), outDir)
        written++
    }
    println('Exported ' + written + ' project images to ' + outDir)
} else {
    println('Give an input folder and an output folder (--args=IN --args=OUT), or a project (--project=...)')
}
