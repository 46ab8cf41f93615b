SET @punctual_0026 = (SELECT IF(table_type = 'VIEW', 'tasks', 'punctual_tasks') FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'punctual_tasks');--> statement-breakpoint
SET @punctual_0026_sql = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS WHERE table_schema = DATABASE() AND table_name = @punctual_0026 AND column_name = 'key_tail'), 'DO 0', CONCAT('ALTER TABLE `', @punctual_0026, '` ADD `key_tail` varchar(191) GENERATED ALWAYS AS (SUBSTRING_INDEX(`task_key`, '':'', -1)) VIRTUAL, ADD INDEX `tasks_key_tail` (`key_tail`)'));--> statement-breakpoint
PREPARE punctual_0026 FROM @punctual_0026_sql;--> statement-breakpoint
EXECUTE punctual_0026;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0026;--> statement-breakpoint
SET @punctual_0026_sql = IF(@punctual_0026 = 'tasks', 'CREATE OR REPLACE SQL SECURITY INVOKER VIEW `punctual_tasks` AS SELECT * FROM `tasks`', 'DO 0');--> statement-breakpoint
PREPARE punctual_0026 FROM @punctual_0026_sql;--> statement-breakpoint
EXECUTE punctual_0026;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0026;
