from ._common import checks, commit, orient

APPDB = """package dev.fieldnotes.data

import androidx.room.Database
import androidx.room.Room
import androidx.room.RoomDatabase
import android.content.Context

@Database(entities = [Note::class, Tag::class, NoteTag::class], version = 4)
abstract class AppDatabase : RoomDatabase() {
    abstract fun notes(): NoteDao

    companion object {
        fun build(context: Context): AppDatabase =
            Room.databaseBuilder(context, AppDatabase::class.java, "fieldnotes.db")
                .addMigrations(MIGRATION_1_2, MIGRATION_2_3)
                .build()
    }
}
"""

GRADLE = """plugins {
    id("com.android.application")
    id("org.jetbrains.kotlin.android")
    id("org.jetbrains.kotlin.kapt")
}

android {
    namespace = "dev.fieldnotes"
    compileSdk = 34
    defaultConfig {
        applicationId = "dev.fieldnotes"
        minSdk = 24
        targetSdk = 34
        versionCode = 41
        versionName = "2.6.0"
    }
}

dependencies {
    implementation("androidx.room:room-runtime:2.6.1")
    implementation("androidx.room:room-ktx:2.6.1")
    kapt("androidx.room:room-compiler:2.6.1")
    implementation("com.jakewharton.threetenabp:threetenabp:1.4.7")
}

kapt {
    arguments {
        arg("room.schemaLocation", "$projectDir/schemas")
    }
}
"""

VIEWMODEL = """package dev.fieldnotes.ui.notes

import androidx.lifecycle.ViewModel
import kotlinx.coroutines.GlobalScope
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.launch

class NotesViewModel(private val repo: NotesRepository) : ViewModel() {
    val notes = MutableStateFlow<List<Note>>(emptyList())

    fun observe(query: String) {
        GlobalScope.launch {
            repo.search(query).collect { notes.value = it }
        }
    }
}
"""


def build(ds):
    h = ds.history("h08", "claude-code", "/home/dev/src/fieldnotes-android",
                   "Kotlin Android note-taking app: a Room migration crash, kapt to KSP, a coroutine leak in the notes "
                   "ViewModel, a minSdk bump, and a flaky Espresso test.",
                   start="2026-04-13T08:00:00Z")
    h.commits = [("5a0e7c3", "Tags on notes (Room v4)"), ("e9b214d", "Compose note editor"), ("3f7a6c0", "Release 2.6.0")]

    # ---- s1: Room migration crash
    s = h.session("2026-04-13T10:30:02Z", mode="default")
    s.prompt("Crashlytics: 2.6.0 crashes on launch for users upgrading from 2.5. IllegalStateException: A migration "
             "from 3 to 4 was required but not found. Tags shipped in v4 of the DB. Fix without wiping their notes.")
    orient(s)
    s.read("app/src/main/java/dev/fieldnotes/data/AppDatabase.kt", APPDB)
    s.glob("app/schemas/dev.fieldnotes.data.AppDatabase/*.json", ["app/schemas/dev.fieldnotes.data.AppDatabase/1.json",
           "app/schemas/dev.fieldnotes.data.AppDatabase/2.json", "app/schemas/dev.fieldnotes.data.AppDatabase/3.json",
           "app/schemas/dev.fieldnotes.data.AppDatabase/4.json"])
    s.bash("diff <(jq -r '.database.entities[].tableName' app/schemas/dev.fieldnotes.data.AppDatabase/3.json) "
           "<(jq -r '.database.entities[].tableName' app/schemas/dev.fieldnotes.data.AppDatabase/4.json)", "1a2,3\n> tags\n> note_tags\n",
           desc="Tables added between v3 and v4")
    s.bash("jq -r '.database.entities[] | select(.tableName==\"note_tags\") | .createSql' app/schemas/dev.fieldnotes.data.AppDatabase/4.json",
           "CREATE TABLE IF NOT EXISTS `${TABLE_NAME}` (`noteId` INTEGER NOT NULL, `tagId` INTEGER NOT NULL, PRIMARY KEY(`noteId`, `tagId`), "
           "FOREIGN KEY(`noteId`) REFERENCES `notes`(`id`) ON UPDATE NO ACTION ON DELETE CASCADE )\n", desc="v4 note_tags DDL")
    e_mig = s.write("app/src/main/java/dev/fieldnotes/data/Migrations.kt", """package dev.fieldnotes.data

import androidx.room.migration.Migration
import androidx.sqlite.db.SupportSQLiteDatabase

/** v4 added tags. Same DDL as schemas/4.json, so the schema validation after migrate passes. */
val MIGRATION_3_4 = object : Migration(3, 4) {
    override fun migrate(db: SupportSQLiteDatabase) {
        db.execSQL("CREATE TABLE IF NOT EXISTS `tags` (`id` INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, `name` TEXT NOT NULL)")
        db.execSQL("CREATE UNIQUE INDEX IF NOT EXISTS `index_tags_name` ON `tags` (`name`)")
        db.execSQL(
            "CREATE TABLE IF NOT EXISTS `note_tags` (`noteId` INTEGER NOT NULL, `tagId` INTEGER NOT NULL, " +
                "PRIMARY KEY(`noteId`, `tagId`), FOREIGN KEY(`noteId`) REFERENCES `notes`(`id`) ON DELETE CASCADE)"
        )
    }
}
""")
    e_addmig = s.edit("app/src/main/java/dev/fieldnotes/data/AppDatabase.kt", ".addMigrations(MIGRATION_1_2, MIGRATION_2_3)",
                      ".addMigrations(MIGRATION_1_2, MIGRATION_2_3, MIGRATION_3_4)")
    s.write("app/src/androidTest/java/dev/fieldnotes/data/MigrationTest.kt", """package dev.fieldnotes.data

class MigrationTest {
    @get:Rule val helper = MigrationTestHelper(InstrumentationRegistry.getInstrumentation(), AppDatabase::class.java)

    @Test fun migrate3To4_keepsNotes() {
        helper.createDatabase("test.db", 3).use { it.execSQL("INSERT INTO notes (id, title, body) VALUES (1, 'a', 'b')") }
        val db = helper.runMigrationsAndValidate("test.db", 4, true, MIGRATION_3_4)
        db.query("SELECT COUNT(*) FROM notes").use { c -> c.moveToFirst(); assertEquals(1, c.getInt(0)) }
    }
}
""")
    e_migtest_fail = s.bash("./gradlew connectedDebugAndroidTest -Pandroid.testInstrumentationRunnerArguments.class=dev.fieldnotes.data.MigrationTest",
                            "", code=1, stderr=(
                                "dev.fieldnotes.data.MigrationTest > migrate3To4_keepsNotes[Pixel_7_API_34(AVD) - 14] FAILED\n"
                                "\tjava.lang.IllegalStateException: Migration didn't properly handle: note_tags(dev.fieldnotes.data.NoteTag).\n"
                                "\t Expected:\n\tforeignKeys=[ForeignKey{referenceTable='notes', onDelete='CASCADE', onUpdate='NO ACTION', columnNames=[noteId]}], "
                                "indices=[Index{name='index_note_tags_tagId', unique=false, columns=[tagId]}]\n"
                                "\t Found:\n\tforeignKeys=[ForeignKey{referenceTable='notes', onDelete='CASCADE', onUpdate='NO ACTION', columnNames=[noteId]}], indices=[]\n\n"
                                "FAILURE: Build failed with an exception.\n"), desc="Run the migration test", secs=84.0)
    s.edit("app/src/main/java/dev/fieldnotes/data/Migrations.kt", """                "PRIMARY KEY(`noteId`, `tagId`), FOREIGN KEY(`noteId`) REFERENCES `notes`(`id`) ON DELETE CASCADE)"
        )""", """                "PRIMARY KEY(`noteId`, `tagId`), FOREIGN KEY(`noteId`) REFERENCES `notes`(`id`) ON DELETE CASCADE)"
        )
        db.execSQL("CREATE INDEX IF NOT EXISTS `index_note_tags_tagId` ON `note_tags` (`tagId`)")""")
    s.bash("./gradlew connectedDebugAndroidTest -Pandroid.testInstrumentationRunnerArguments.class=dev.fieldnotes.data.MigrationTest",
           "\n> Task :app:connectedDebugAndroidTest\nStarting 1 tests on Pixel_7_API_34(AVD) - 14\nFinished 1 tests on Pixel_7_API_34(AVD) - 14\n\nBUILD SUCCESSFUL in 1m 12s\n",
           desc="Run the migration test", secs=73.0)
    s.stop("2.6.0 bumped the Room version to 4 for tags but shipped no 3->4 migration, so upgraders crashed. Added "
           "MIGRATION_3_4 in data/Migrations.kt creating tags, its unique name index, note_tags and the tagId index "
           "(the first test run caught the missing index), registered it in AppDatabase.build, and a "
           "MigrationTestHelper test that keeps existing notes.")
    s.prompt("commit and bump to 2.6.1")
    s.read("app/build.gradle.kts", GRADLE)
    s.edit("app/build.gradle.kts", 'versionCode = 41\n        versionName = "2.6.0"', 'versionCode = 42\n        versionName = "2.6.1"')
    commit(s, "Room: add the missing 3->4 migration (2.6.1)", ["app/src/main/java/dev/fieldnotes/data/Migrations.kt",
           "app/src/main/java/dev/fieldnotes/data/AppDatabase.kt", "app/src/androidTest/java/dev/fieldnotes/data/MigrationTest.kt",
           "app/build.gradle.kts"], "b8c1e54", 41, 3)
    s.stop("Committed as b8c1e54, versionName 2.6.1 (code 42).")
    s.end()

    # ---- s2: kapt -> KSP
    s = h.session("2026-04-16T14:12:45Z", mode="acceptEdits")
    e_p_ksp = s.prompt("Incremental builds take ~50s and most of it is kaptGenerateStubsDebugKotlin. Room supports KSP, "
                       "let's move off kapt completely.")
    orient(s)
    s.bash("./gradlew assembleDebug --profile --offline 2>&1 | tail -3 && ls build/reports/profile/", "BUILD SUCCESSFUL in 52s\n"
           "41 actionable tasks: 7 executed, 34 up-to-date\nprofile-2026-04-16-14-13-51.html\n", desc="Profile a debug build", secs=55.0)
    s.read("app/build.gradle.kts")
    s.read("build.gradle.kts", """plugins {
    id("com.android.application") version "8.7.3" apply false
    id("org.jetbrains.kotlin.android") version "2.0.21" apply false
}
""")
    e_ksp_root = s.edit("build.gradle.kts", """    id("org.jetbrains.kotlin.android") version "2.0.21" apply false
}""", """    id("org.jetbrains.kotlin.android") version "2.0.21" apply false
    id("com.google.devtools.ksp") version "2.0.21-1.0.28" apply false
}""")
    e_ksp_app = s.multiedit("app/build.gradle.kts", [
        ('    id("org.jetbrains.kotlin.kapt")', '    id("com.google.devtools.ksp")'),
        ('    kapt("androidx.room:room-compiler:2.6.1")', '    ksp("androidx.room:room-compiler:2.6.1")'),
    ])
    e_ksp_fail = s.bash("./gradlew assembleDebug", "", code=1, stderr=(
        "e: file:///home/dev/src/fieldnotes-android/app/build.gradle.kts:30:1: Unresolved reference: kapt\n\n"
        "FAILURE: Build failed with an exception.\n\n* Where:\nBuild file '/home/dev/src/fieldnotes-android/app/build.gradle.kts' line: 30\n\n"
        "* What went wrong:\nScript compilation error:\n\n  Line 30: kapt {\n           ^ Unresolved reference: kapt\n\n"
        "BUILD FAILED in 4s\n"), desc="Build", secs=5.0)
    s.bash("sed -n '30,35p' app/build.gradle.kts", "kapt {\n    arguments {\n        arg(\"room.schemaLocation\", \"$projectDir/schemas\")\n    }\n}\n",
           desc="The leftover kapt block")
    s.edit("app/build.gradle.kts", """kapt {
    arguments {
        arg("room.schemaLocation", "$projectDir/schemas")
    }
}""", """ksp {
    arg("room.schemaLocation", "$projectDir/schemas")
}""")
    s.bash("./gradlew assembleDebug && touch app/src/main/java/dev/fieldnotes/ui/notes/NotesScreen.kt && ./gradlew assembleDebug 2>&1 | tail -2",
           "BUILD SUCCESSFUL in 19s\n41 actionable tasks: 5 executed, 36 up-to-date\n", desc="Build twice (incremental)", secs=70.0)
    s.bash("git status --short app/schemas", "", desc="Schemas unchanged")
    s.stop("Room's annotation processor now runs through KSP (com.google.devtools.ksp 2.0.21-1.0.28) instead of kapt, "
           "and the kapt { room.schemaLocation } block became ksp { arg(...) } (the first build failed on that leftover "
           "block). An incremental debug build after touching one screen went from 52 s to 19 s; exported schemas "
           "are byte-identical.")
    s.prompt("commit")
    checks(s, "kotlin", [0])
    commit(s, "Build: Room via KSP instead of kapt", ["build.gradle.kts", "app/build.gradle.kts"], "41d7aa9", 5, 8)
    s.stop("Committed as 41d7aa9.")
    s.end()

    # ---- s3: coroutine leak
    s = h.session("2026-04-21T09:50:19Z", mode="acceptEdits")
    s.prompt("LeakCanary reports NotesViewModel retained after leaving the notes screen, and search results from an old "
             "query sometimes replace the new ones. Look at observe().")
    orient(s)
    s.read("app/src/main/java/dev/fieldnotes/ui/notes/NotesViewModel.kt", VIEWMODEL)
    s.grep("GlobalScope", "app/src/main/java/dev/fieldnotes/ui/notes/NotesViewModel.kt:12:        GlobalScope.launch {\n"
           "app/src/main/java/dev/fieldnotes/sync/SyncWorker.kt:33:        GlobalScope.launch(Dispatchers.IO) { uploadPending() }\n", path="app/src")
    e_vmfix = s.write("app/src/main/java/dev/fieldnotes/ui/notes/NotesViewModel.kt", """package dev.fieldnotes.ui.notes

import androidx.lifecycle.ViewModel
import androidx.lifecycle.viewModelScope
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.SharingStarted
import kotlinx.coroutines.flow.StateFlow
import kotlinx.coroutines.flow.debounce
import kotlinx.coroutines.flow.flatMapLatest
import kotlinx.coroutines.flow.stateIn

class NotesViewModel(private val repo: NotesRepository) : ViewModel() {
    private val query = MutableStateFlow("")

    // flatMapLatest cancels the previous search when the query changes; viewModelScope dies with the ViewModel.
    val notes: StateFlow<List<Note>> = query
        .debounce(150)
        .flatMapLatest { repo.search(it) }
        .stateIn(viewModelScope, SharingStarted.WhileSubscribed(5_000), emptyList())

    fun observe(q: String) {
        query.value = q
    }
}
""")
    s.bash("./gradlew testDebugUnitTest --tests '*NotesViewModelTest*'", "\n> Task :app:testDebugUnitTest\n\nNotesViewModelTest > latestQueryWins PASSED\n"
           "NotesViewModelTest > emptyQueryReturnsAll PASSED\n\nBUILD SUCCESSFUL in 21s\n", desc="ViewModel tests", secs=22.0)
    s.stop("observe() launched a new GlobalScope collector for every query: they were never cancelled (leaking the "
           "ViewModel through the repo callback) and kept writing old results into notes. It's now one StateFlow: "
           "query -> debounce(150) -> flatMapLatest(repo::search) -> stateIn(viewModelScope). SyncWorker also uses "
           "GlobalScope but runs in WorkManager, so I left it.")
    s.prompt("commit")
    checks(s, "kotlin", [0])
    commit(s, "NotesViewModel: flatMapLatest in viewModelScope instead of GlobalScope", ["app/src/main/java/dev/fieldnotes/ui/notes/NotesViewModel.kt"],
           "0f6b3d2", 17, 7)
    s.stop("Committed as 0f6b3d2.")
    s.end()

    # ---- s4: minSdk bump
    s = h.session("2026-04-28T16:20:07Z", mode="acceptEdits")
    e_p_minsdk = s.prompt("Play console says <0.6% of our installs are on API 24-25. Raise minSdk to 26 so we can use "
                          "java.time directly and drop ThreeTenABP, and set targetSdk 35 while we're at it (deadline in August).")
    orient(s)
    s.read("app/build.gradle.kts")
    e_sdk = s.multiedit("app/build.gradle.kts", [
        ("compileSdk = 34", "compileSdk = 35"),
        ("minSdk = 24", "minSdk = 26"),
        ("targetSdk = 34", "targetSdk = 35"),
        ('    implementation("com.jakewharton.threetenabp:threetenabp:1.4.7")\n', ""),
    ])
    s.grep("org.threeten.bp", "app/src/main/java/dev/fieldnotes/App.kt:5:import com.jakewharton.threetenabp.AndroidThreeTen\n"
           "app/src/main/java/dev/fieldnotes/data/Converters.kt:4:import org.threeten.bp.Instant\n"
           "app/src/main/java/dev/fieldnotes/ui/notes/NoteRow.kt:9:import org.threeten.bp.format.DateTimeFormatter\n", path="app/src")
    s.bash("sed -i 's/org\\.threeten\\.bp/java.time/g' app/src/main/java/dev/fieldnotes/data/Converters.kt app/src/main/java/dev/fieldnotes/ui/notes/NoteRow.kt && "
           "sed -i '/AndroidThreeTen/d' app/src/main/java/dev/fieldnotes/App.kt", "", desc="Switch imports to java.time")
    e_edge = s.bash("./gradlew assembleDebug 2>&1 | tail -8", "", code=1, stderr=(
        "e: file:///home/dev/src/fieldnotes-android/app/src/main/java/dev/fieldnotes/ui/MainActivity.kt:22:9 "
        "'setDecorFitsSystemWindows' is deprecated. Edge-to-edge is enforced for apps targeting SDK 35\n"
        "w: ...\n\nFAILURE: Build failed with an exception.\n* What went wrong:\nExecution failed for task ':app:compileDebugKotlin'.\n"
        "> Compilation error. See log for more details\n\nBUILD FAILED in 31s\n"), desc="Build", secs=32.0)
    s.read("app/src/main/java/dev/fieldnotes/ui/MainActivity.kt", """class MainActivity : ComponentActivity() {
    override fun onCreate(savedInstanceState: Bundle?) {
        super.onCreate(savedInstanceState)
        WindowCompat.setDecorFitsSystemWindows(window, true)
        setContent { FieldNotesApp() }
    }
}
""")
    s.edit("app/src/main/java/dev/fieldnotes/ui/MainActivity.kt", "        WindowCompat.setDecorFitsSystemWindows(window, true)",
           "        enableEdgeToEdge() // SDK 35 enforces edge-to-edge; screens apply WindowInsets padding")
    s.bash("./gradlew assembleDebug testDebugUnitTest 2>&1 | tail -2", "BUILD SUCCESSFUL in 1m 4s\n62 actionable tasks: 18 executed, 44 up-to-date\n",
           desc="Build and unit tests", secs=65.0)
    s.stop("minSdk 26, compileSdk/targetSdk 35. ThreeTenABP is removed and Converters/NoteRow use java.time. The SDK 35 "
           "target made the build fail on the deprecated setDecorFitsSystemWindows, so MainActivity now calls "
           "enableEdgeToEdge(); the Compose screens already apply inset padding.")
    s.prompt("commit")
    commit(s, "minSdk 26, targetSdk 35; java.time instead of ThreeTenABP", ["app/build.gradle.kts", "app/src"], "8e2d4f1", 9, 14, add="-A app")
    s.stop("Committed as 8e2d4f1.")
    s.end()

    # ---- s5: flaky espresso
    s = h.session("2026-05-05T11:03:38Z", mode="acceptEdits")
    s.prompt("NoteEditorTest.savesTags fails on CI emulators now and then: 'No views in hierarchy found matching: "
             "with text: is \"field\"'. Make it deterministic")
    orient(s)
    e_espresso = s.bash("./gradlew connectedDebugAndroidTest -Pandroid.testInstrumentationRunnerArguments.class=dev.fieldnotes.ui.NoteEditorTest",
                        "", code=1, stderr=("dev.fieldnotes.ui.NoteEditorTest > savesTags[Pixel_7_API_34(AVD) - 14] FAILED\n"
                                            "\tandroidx.test.espresso.NoMatchingViewException: No views in hierarchy found matching: with text: is \"field\"\n\n"
                                            "FAILURE: Build failed with an exception.\n"), desc="Run the editor test", secs=70.0)
    s.read("app/src/androidTest/java/dev/fieldnotes/ui/NoteEditorTest.kt", """class NoteEditorTest {
    @get:Rule val compose = createAndroidComposeRule<MainActivity>()

    @Test fun savesTags() {
        compose.onNodeWithText("New note").performClick()
        compose.onNodeWithTag("tagInput").performTextInput("field")
        compose.onNodeWithText("Save").performClick()
        onView(withText("field")).check(matches(isDisplayed()))
    }
}
""")
    e_espfix = s.edit("app/src/androidTest/java/dev/fieldnotes/ui/NoteEditorTest.kt", """        compose.onNodeWithText("Save").performClick()
        onView(withText("field")).check(matches(isDisplayed()))""", """        compose.onNodeWithText("Save").performClick()
        // Saving goes through Room on Dispatchers.IO, which Compose's idling doesn't track: wait for the chip.
        compose.waitUntil(timeoutMillis = 5_000) {
            compose.onAllNodesWithText("field").fetchSemanticsNodes().isNotEmpty()
        }
        compose.onNodeWithText("field").assertIsDisplayed()""")
    s.bash("for i in 1 2 3 4 5; do ./gradlew -q connectedDebugAndroidTest -Pandroid.testInstrumentationRunnerArguments.class=dev.fieldnotes.ui.NoteEditorTest || echo FAIL; done",
           "", desc="Run it 5 times", secs=320.0)
    s.stop("The test checked for the tag chip with Espresso right after Save, but the save runs through Room on "
           "Dispatchers.IO, which neither Espresso nor Compose idling waits for. It now uses compose.waitUntil for the "
           "chip (5 s timeout) and asserts with the Compose API. 5/5 runs pass.")
    s.prompt("commit")
    commit(s, "NoteEditorTest: wait for the saved tag chip", ["app/src/androidTest/java/dev/fieldnotes/ui/NoteEditorTest.kt"], "c5a9b70", 5, 1)
    s.stop("Committed as c5a9b70.")
    s.end()

    h.q("fix_location", "Where did we fix the launch crash for users upgrading from 2.5?", "upgrade crash launch",
        "New MIGRATION_3_4 in app/src/main/java/dev/fieldnotes/data/Migrations.kt, registered in AppDatabase.build.",
        ["Migrations.kt", "MIGRATION_3_4"], [e_mig, e_addmig])
    h.q("failed_command", "What did the Room migration test catch on its first run?", "migration test failure",
        "Migration didn't properly handle note_tags: the index_note_tags_tagId index was missing.",
        ["index_note_tags_tagId"], [e_migtest_fail])
    h.q("decision", "Why did we move annotation processing off kapt?", "kapt build slow",
        "Incremental builds took ~50 s, mostly kaptGenerateStubs; Room supports KSP.", ["kaptGenerateStubsDebugKotlin"], [e_p_ksp])
    h.q("failed_command", "What broke right after switching the build to KSP?", "ksp build failure",
        "Script compilation error: Unresolved reference: kapt (leftover kapt { room.schemaLocation } block).",
        ["Unresolved reference: kapt"], [e_ksp_fail])
    h.q("fix_location", "Where was the coroutine leak that kept the notes screen's view model alive?", "viewmodel leak",
        "NotesViewModel.kt: GlobalScope.launch per query replaced by flatMapLatest + stateIn(viewModelScope).",
        ["NotesViewModel.kt"], [e_vmfix])
    h.q("knowledge_update", "What is the app's minimum Android version now?", "minimum sdk version",
        "minSdk 26 (was 24), targetSdk 35.", ["minSdk = 26"], [e_sdk])
    h.q("decision", "Why did we raise minSdk?", "raise min sdk",
        "Under 0.6% of installs were on API 24-25; 26 allows java.time directly and dropping ThreeTenABP.",
        ["ThreeTenABP"], [e_p_minsdk])
    h.q("file_history", "Which build files changed for the KSP migration?", "ksp gradle",
        "build.gradle.kts (ksp plugin version) and app/build.gradle.kts (plugin, ksp(room-compiler), ksp { } block).",
        ["app/build.gradle.kts", "com.google.devtools.ksp"], [e_ksp_root, e_ksp_app])
    h.q("temporal", "What made the build fail on the day we raised the target SDK?", "target sdk build error",
        "setDecorFitsSystemWindows deprecated: edge-to-edge enforced for SDK 35 (MainActivity.kt).",
        ["setDecorFitsSystemWindows"], [e_edge])
    h.q("fix_location", "How did we make the tag-saving UI test deterministic?", "flaky ui test",
        "NoteEditorTest.kt: compose.waitUntil for the 'field' chip after Save instead of an immediate Espresso check.",
        ["NoteEditorTest.kt", "waitUntil"], [e_espfix])
